import { describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import type { ChatPublisher, ProposalMessageView } from '../../src/chat/types.js';
import { createChatMessageStore } from '../../src/db/chat-store.js';
import { chatCoreOnLane } from '../support/chat-core.js';
import { drivers } from '../support/database.js';
import { lendingLanes } from '../support/lending-lane.js';
import { configYaml, deleteWorkspaceOperation } from '../support/operations.js';

/**
 * Through the real core: a proposal approved in Slack runs on a remote executor, and its message is
 * edited to the result by the edit its execution's start queued (held back 250 ms), which the
 * result's statement claimed for this process (src/outbox/README.md, "A waiting edit taken by its
 * result"): the edit shows the committed result, and the lane makes no claim for it, neither when
 * the result commits nor when the held-back edit would have fallen due.
 */
describe.each(drivers)("a result's chat edit (%s)", (driver) => {
  const lanes = lendingLanes(driver);

  it('is the waiting edit, claimed by the result, run at once with the committed state', async () => {
    const [operation] = parseConfig(configYaml([deleteWorkspaceOperation({ approvers: ['slack:U0ALICE'], slack: 'C0APPROVALS' })]), {}, 'test.yaml').operations;
    if (!operation) throw new Error('no operation');
    const edits: ProposalMessageView[] = [];
    const publisher: ChatPublisher = {
      platform: 'slack',
      post: async (channel, view) => ({ channel, messageId: `${view.id}.1` }),
      async update(_ref, view) {
        edits.push(view);
      },
    };
    const messages = createChatMessageStore(lanes.database().db);
    const { runs, proposals, agent } = await chatCoreOnLane(lanes, {
      operation,
      publisher,
      messages,
      // Remote: the result is recorded by its own (conditional) statement once the call returned.
      executor: { kind: 'remote', run: async () => ({ deleted: true }) },
      agentId: `agt_result_edit_${driver}`,
    });
    const { proposal } = await proposals.propose(agent, { operation: 'delete_workspace', params: { workspace: 'w1' } });
    // The first post is taken by the propose statement: the lane's one claim so far was its start.
    await vi.waitFor(async () => expect(await messages.get(proposal.id, 'slack')).not.toBeNull(), { timeout: 10_000, interval: 20 });
    lanes.resetClaims();
    await proposals.approve(proposal.id, { identity: 'slack:U0ALICE', via: 'slack' });
    await vi.waitFor(() => expect(edits.map((view) => view.status)).toEqual(['committed']), { timeout: 10_000, interval: 20 });
    // The post, and the edit queued when the execution began, which ran the result: no third job.
    // (Done once its completion is written, just after the edit reached Slack.)
    await vi.waitFor(async () => expect((await lanes.rowsOf(proposal.id)).map((job) => job.status)).toEqual(['done', 'done']), {
      timeout: 10_000,
      interval: 20,
    });
    const jobsOfMessage = await lanes.rowsOf(proposal.id);
    expect(runs.map((run) => run.jobId)).toEqual(jobsOfMessage.map((job) => job.id));
    expect(runs[1]?.row).toMatchObject({ status: 'running', attempts: 1 });
    // Past the moment the held-back edit fell due, still no claim: its wake-up was dropped.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(lanes.claims()).toBe(0);
    expect(edits).toHaveLength(1);
  });
});
