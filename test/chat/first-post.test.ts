import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import { createChatSync } from '../../src/chat/sync.js';
import type { ChatPublisher, ProposalMessageView } from '../../src/chat/types.js';
import { createProposalService } from '../../src/core/proposals.js';
import { createChatMessageStore } from '../../src/db/chat-store.js';
import type { Database } from '../../src/db/database.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import { createStore } from '../../src/db/store.js';
import type { JobStore } from '../../src/outbox/ports.js';
import { createOutboxWorker } from '../../src/outbox/worker.js';
import { drivers, openTestDatabase } from '../support/database.js';
import { configYaml, deleteWorkspaceOperation, USD_COST } from '../support/operations.js';
import { agentRecord } from '../support/records.js';

/**
 * A proposal left to people is first posted from what its propose transaction knew (the outbox took
 * the post as it was queued, src/outbox/README.md): the message must be the one a post from the
 * database would have shown, field for field, and no read or claim may be made for it.
 */
describe.each(drivers)("a new proposal's first post (%s)", (driver) => {
  let database: Database;
  beforeAll(async () => {
    database = await openTestDatabase(driver);
  }, 180_000);
  afterAll(() => database.close());

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
    const messages = createChatMessageStore(database.db);
    let reads = 0;
    let claims = 0;
    const countedMessages = {
      ...messages,
      getForSync(...args: Parameters<typeof messages.getForSync>) {
        reads += 1;
        return messages.getForSync(...args);
      },
    };
    const stored = createJobStore(database.db);
    const jobs: JobStore = {
      ...stored,
      claimDue(...args) {
        claims += 1;
        return stored.claimDue(...args);
      },
    };
    const base = createStore(database.db);
    const chatSync = createChatSync({
      store: base,
      messages: countedMessages,
      publishers: [publisher],
      channelFor: () => 'C0APPROVALS',
      describe: () => operation.description,
      clock: () => new Date(),
    });
    const worker = createOutboxWorker({
      jobs,
      logger: pino({ level: 'silent' }),
      lanes: [{ name: 'chat', kinds: ['chat.sync'], concurrency: 2 }],
      pollIntervalMs: 600_000,
      handlers: { 'chat.sync': ({ proposalId, platform }, { known }) => chatSync.sync(proposalId, platform, known) },
    });
    worker.start();
    await vi.waitFor(() => expect(claims).toBe(1), { timeout: 10_000, interval: 5 });
    const store = createStore(database.db, { takeJob: worker.takeJob });
    const agent = agentRecord(`agt_first_post_${driver}`);
    await store.transaction(async (tx) => tx.insertAgent(agent));
    const proposals = createProposalService({
      store,
      operation: (name) => (name === operation.name ? operation : undefined),
      executorFor: () => ({ kind: 'local', run: async () => ({}) }),
      clock: () => new Date(),
      chatPlatforms: new Set(['slack'] as const),
      maxPendingPerAgent: 10,
    });
    try {
      const { proposal } = await proposals.propose(agent, { operation: 'delete_workspace', params: { workspace: 'Ünïcode <b>&"ws"', amount_cents: 123_456 } });
      await vi.waitFor(async () => expect(await messages.get(proposal.id, 'slack')).not.toBeNull(), { timeout: 10_000, interval: 20 });
      expect(reads).toBe(0);
      expect(claims).toBe(1);

      const found = await messages.getForSync(proposal.id, 'slack');
      if (!found) throw new Error('no proposal');
      const fromDatabase = await chatSync.buildView(found.proposal, found.agent, found.approvals);
      expect(posted).toEqual([fromDatabase]);
      expect(fromDatabase).toMatchObject({ status: 'pending', quorum: 2, approvals: [], cost: '$1,234.56' });
    } finally {
      await worker.stop();
    }
  });
});
