import { createChatSync } from '../../src/chat/sync.js';
import type { ChatMessageStore } from '../../src/chat/ports.js';
import type { ChatPublisher } from '../../src/chat/types.js';
import type { Executor } from '../../src/core/executor.js';
import type { OperationSpec } from '../../src/core/model.js';
import { createProposalService } from '../../src/core/proposals.js';
import type { lendingLanes } from './lending-lane.js';
import { agentRecord } from './records.js';

/**
 * The real core over a lending chat lane (`lendingLanes`): a proposal service for `operation`, whose
 * messages the lane's chat.sync jobs post and edit through `publisher` (Slack, channel C0APPROVALS)
 * with `messages`, and one agent. For suites that follow a proposal's message through the outbox.
 */
export async function chatCoreOnLane(
  lanes: ReturnType<typeof lendingLanes>,
  options: { operation: OperationSpec; publisher: ChatPublisher; messages: ChatMessageStore; executor: Executor; agentId: string },
) {
  const { operation, publisher, messages, executor } = options;
  let chatSync: ReturnType<typeof createChatSync> | null = null;
  const { store, runs } = await lanes.setUp(2, {
    handle: ({ proposalId, platform }, { known }) => chatSync?.sync(proposalId, platform, known) ?? Promise.resolve(),
  });
  chatSync = createChatSync({
    store,
    messages,
    publishers: [publisher],
    channelFor: () => 'C0APPROVALS',
    describe: () => operation.description,
    clock: () => new Date(),
  });
  const agent = agentRecord(options.agentId);
  await store.transaction(async (tx) => tx.insertAgent(agent));
  const proposals = createProposalService({
    store,
    operation: (name) => (name === operation.name ? operation : undefined),
    executorFor: () => executor,
    clock: () => new Date(),
    chatPlatforms: new Set(['slack'] as const),
    maxPendingPerAgent: 10,
  });
  return { store, runs, chatSync, agent, proposals };
}
