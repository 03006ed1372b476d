import { describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import type { ChatPublisher, ProposalMessageView } from '../../src/chat/types.js';
import { createChatMessageStore } from '../../src/db/chat-store.js';
import { chatCoreOnLane } from '../support/chat-core.js';
import { drivers } from '../support/database.js';
import { lendingLanes } from '../support/lending-lane.js';
import { configYaml, deleteWorkspaceOperation, USD_COST } from '../support/operations.js';

/**
 * A proposal left to people is first posted from what its propose transaction knew (the outbox took
 * the post as it was queued, src/outbox/README.md): the message must be the one a post from the
 * database would have shown, field for field, and no read or claim may be made for it.
 */
describe.each(drivers)("a new proposal's first post (%s)", (driver) => {
  const lanes = lendingLanes(driver);

  it('shows what a post rendered from the stored proposal shows, and reads nothing for it', async () => {
    const [operation] = parseConfig(
      configYaml([
        deleteWorkspaceOperation({
          approvers: ['slack:U0ALICE', 'slack:U0BOB'],
          quorum: 2,
          slack: 'C0APPROVALS',
          amountCents: true,
          cost: USD_COST,
          remind: ['1m'],
          expiresIn: '10m',
        }),
      ]),
      {},
      'test.yaml',
    ).operations;
    if (!operation) throw new Error('no operation');
    const posted: ProposalMessageView[] = [];
    const publisher: ChatPublisher = {
      platform: 'slack',
      async post(channel, view) {
        posted.push(view);
        return { channel, messageId: `${view.id}.1` };
      },
      async update() {},
    };
    const messages = createChatMessageStore(lanes.database().db);
    let reads = 0;
    const countedMessages = {
      ...messages,
      getForSync(...args: Parameters<typeof messages.getForSync>) {
        reads += 1;
        return messages.getForSync(...args);
      },
    };
    const { chatSync, proposals, agent } = await chatCoreOnLane(lanes, {
      operation,
      publisher,
      messages: countedMessages,
      executor: { kind: 'local', run: async () => ({}) },
      agentId: `agt_first_post_${driver}`,
    });
    const { proposal } = await proposals.propose(agent, { operation: 'delete_workspace', params: { workspace: 'Ünïcode <b>&"ws"', amount_cents: 123_456 } });
    await vi.waitFor(async () => expect(await messages.get(proposal.id, 'slack')).not.toBeNull(), { timeout: 10_000, interval: 20 });
    expect(reads).toBe(0);
    // No claim beyond the lane's start (which the harness waited for).
    expect(lanes.claims()).toBe(0);

    const found = await messages.getForSync(proposal.id, 'slack');
    if (!found) throw new Error('no proposal');
    const fromDatabase = await chatSync.buildView(found.proposal, found.agent, found.approvals);
    expect(posted).toEqual([fromDatabase]);
    expect(fromDatabase).toMatchObject({ status: 'pending', quorum: 2, approvals: [], cost: '$1,234.56' });
  });
});
