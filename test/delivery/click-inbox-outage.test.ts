import { sql } from 'drizzle-orm';
import { describe, expect, it, vi } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import { createStore } from '../../src/db/store.js';
import { createClickInbox, INBOX_UNAVAILABLE_WORDS, InboxUnavailable } from '../../src/outbox/inbox.js';
import { ALICE, buttonPress, startDiscordTwokey, type DiscordTwokey } from '../discord/helpers.js';
import { buttonClick, interactionBody, rejectSubmission } from '../slack/support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from '../slack/support/slack-twokey.js';
import { describeOnPostgres, drivers, openTestDatabase } from '../support/database.js';
import { configYaml, upgradePlanOperation } from '../support/operations.js';
import { openBehindProxy } from '../support/tcp-proxy.js';

/**
 * A click that cannot be stored is never answered as taken: the clicker is told privately that
 * twokey cannot reach its database, and the click changes nothing, whether the database refuses
 * connections or does not answer within the 2 s a write may take (Slack and Discord wait 3 s).
 */

const WAIT = { timeout: 10_000, interval: 20 };
/** A stored Slack approval, as the inbox is given it. */
const approval = (proposalId: string, userId = 'U0CLICKER') => ({
  action: 'approve' as const,
  proposalId,
  userId,
  receivedAt: new Date().toISOString(),
  channel: null,
});
const CONFIG = configYaml([
  upgradePlanOperation({ approvers: ['slack:U0ALICE', `discord:user:${ALICE}`], quorum: 1, slack: 'C0APPROVALS', commit: 'on_approve' }),
]);

/** A transaction holding the jobs table (on the embedded database, everything): writes wait until `release`. */
async function holdJobsTable(database: Database): Promise<() => Promise<void>> {
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  let held = () => {};
  const holding = new Promise<void>((resolve) => (held = resolve));
  const transaction = database.db.transaction(async (tx) => {
    await tx.execute(sql`lock table jobs in access exclusive mode`);
    held();
    await gate;
  });
  await holding;
  return async () => {
    release();
    await transaction;
  };
}

type Platform = 'slack' | 'discord';

/** Slack and Discord each in a twokey of their own, as an operator would run one or the other. */
async function startPlatform(platform: Platform, driver: 'pglite' | 'postgres', database?: Database) {
  if (platform === 'slack') {
    const t: SlackTwokey = await startSlackTwokey({ driver, configYaml: CONFIG, ...(database ? { database } : {}) });
    return {
      twokey: t,
      propose: async () =>
        (await t.request('POST', '/v1/proposals', { apiKey: t.apiKey, body: { operation: 'upgrade_plan', params: { org: 'o', plan: 'pro' } } })).body
          .id as string,
      /** Approve, answered 200 either way; a click that was not stored is followed by an ephemeral message. */
      async approve(id: string) {
        const response = await t.post(interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId: id, userId: 'U0ALICE', channel: 'C0APPROVALS' })));
        expect(response.status).toBe(200);
        return response;
      },
      async toldUnavailable(previously: number) {
        await vi.waitFor(() => {
          const told = t.fake.callsTo('chat.postEphemeral').slice(previously);
          expect(told.map((call) => ({ user: call.args.user, channel: call.args.channel, text: call.args.text }))).toEqual([
            { user: 'U0ALICE', channel: 'C0APPROVALS', text: INBOX_UNAVAILABLE_WORDS },
          ]);
        }, WAIT);
      },
      told: () => t.fake.callsTo('chat.postEphemeral').length,
      close: () => t.close(),
    };
  }
  // No checks before the answer: the click goes straight to being stored, as in a burst.
  const t: DiscordTwokey = await startDiscordTwokey({ driver, configYaml: CONFIG, tuning: { ackBudgetMs: 0 }, ...(database ? { database } : {}) });
  let lastAnswer: unknown = null;
  return {
    twokey: t.twokey,
    propose: async () => (await t.propose('upgrade_plan', { org: 'o', plan: 'pro' })).id,
    async approve(id: string) {
      const response = await t.interact(buttonPress(`twokey:approve:${id}`, { userId: ALICE }));
      expect(response.status).toBe(200);
      lastAnswer = response.body;
      return response;
    },
    async toldUnavailable() {
      // The answer itself: an ephemeral message (flags 64) only the clicker sees.
      expect(lastAnswer).toEqual({ type: 4, data: { content: INBOX_UNAVAILABLE_WORDS, flags: 64, allowed_mentions: { parse: [] } } });
    },
    told: () => 0,
    close: () => t.close(),
  };
}

/**
 * Nothing of the click stayed: no stored click left to run (a late write is deleted, or skipped if a
 * worker claimed it first), no approval, still pending. Read on `database`: after an outage, a
 * connection of the test's own rather than twokey's pool.
 */
async function unchanged(database: Database, id: string): Promise<void> {
  const clicks = createJobStore(database.db);
  const store = createStore(database.db);
  await vi.waitFor(async () => {
    const left = (await clicks.list({ limit: 1_000 })).filter((job) => job.kind.endsWith('.click') && job.payload.proposalId === id);
    expect(left.filter((job) => job.status === 'queued' || job.status === 'running')).toEqual([]);
  }, WAIT);
  expect((await store.getProposal(id))?.status).toBe('pending');
  expect(await store.listApprovals(id)).toEqual([]);
}

describe.each(drivers)('a click while the database does not answer (%s)', (driver) => {
  it.each<Platform>(['slack', 'discord'])(
    '%s: the clicker is told privately; the write that lands late is taken back',
    async (platform) => {
      const chat = await startPlatform(platform, driver);
      try {
        const id = await chat.propose();
        const told = chat.told();
        const release = await holdJobsTable(chat.twokey.services.database);
        try {
          await chat.approve(id);
          await chat.toldUnavailable(told);
        } finally {
          await release();
        }
        await unchanged(chat.twokey.services.database, id);
        // Once the database answers, the same click is taken.
        await chat.approve(id);
        await vi.waitFor(async () => expect((await chat.twokey.services.store.listApprovals(id)).length).toBe(1), WAIT);
      } finally {
        await chat.close();
      }
    },
    60_000,
  );

  it('slack: a submitted reject form keeps the form open with the words, and rejects nothing', async () => {
    const t = await startSlackTwokey({ driver, configYaml: CONFIG });
    try {
      const id = (await t.request('POST', '/v1/proposals', { apiKey: t.apiKey, body: { operation: 'upgrade_plan', params: { org: 'o', plan: 'pro' } } })).body
        .id as string;
      const release = await holdJobsTable(t.services.database);
      let answer;
      try {
        answer = await t.post(interactionBody(rejectSubmission({ proposalId: id, userId: 'U0ALICE', reason: 'no' })));
      } finally {
        await release();
      }
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body)).toEqual({ response_action: 'errors', errors: { twokey_reason: INBOX_UNAVAILABLE_WORDS } });
      await unchanged(t.services.database, id);
    } finally {
      await t.close();
    }
  }, 60_000);
});

describeOnPostgres('a click while PostgreSQL cannot be reached (a network partition)', (driver) => {
  it.each<Platform>(['slack', 'discord'])(
    '%s: the clicker is told privately, and nothing changes',
    async (platform) => {
      const { base, proxy, database, close } = await openBehindProxy(driver);
      const chat = await startPlatform(platform, driver, database);
      try {
        const id = await chat.propose();
        const told = chat.told();
        proxy.hold();
        await chat.approve(id);
        await chat.toldUnavailable(told);
        await unchanged(base, id);
        proxy.release();
        // The write that was on its way lands now, and is taken back.
        await unchanged(base, id);
      } finally {
        proxy.release();
        await chat.close();
        await close();
      }
    },
    60_000,
  );
});

describe('the inbox when a write lands after its click was answered as not stored', () => {
  it('deletes it, and a worker that claimed it first skips it', async () => {
    const database = await openTestDatabase('pglite');
    const jobs = createJobStore(database.db);
    const late: Array<{ id: number; deleted: boolean }> = [];
    const inbox = createClickInbox({
      jobs,
      clock: () => new Date(),
      wake: () => {},
      storeDeadlineMs: 50,
      onLateWrite: (id, deleted) => late.push({ id, deleted }),
    });
    const release = await holdJobsTable(database);
    const refused = await inbox.store({ kind: 'slack.click', payload: approval('prp_late'), proposalId: 'prp_late' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(InboxUnavailable);
    await release();
    await vi.waitFor(() => expect(late).toHaveLength(1), WAIT);
    expect(late[0]?.deleted).toBe(true);
    expect(await jobs.list({})).toEqual([]);
    const handler = vi.fn(async () => {});
    const context = { signal: new AbortController().signal, attempt: 1 };
    await inbox.guard(handler)(approval('prp_late'), { ...context, jobId: late[0]?.id ?? 0 });
    expect(handler).not.toHaveBeenCalled();
    await inbox.guard(handler)(approval('prp_late'), { ...context, jobId: (late[0]?.id ?? 0) + 1 });
    expect(handler).toHaveBeenCalledTimes(1);
    await database.close();
  });
});

describe("a worker that claims a late write before this process has read the write's answer", () => {
  it('waits for the write to be taken back, then skips it', async () => {
    const database = await openTestDatabase('pglite');
    const jobs = createJobStore(database.db);
    let answerArrives = () => {};
    const answerHeld = new Promise<void>((resolve) => (answerArrives = resolve));
    const inbox = createClickInbox({
      // The row is committed at once; its id reaches the inbox only when `answerArrives` (another connection's claim may be faster).
      jobs: {
        ...jobs,
        insertMany: async (newJobs, now) => {
          const ids = await jobs.insertMany(newJobs, now);
          await answerHeld;
          return ids;
        },
      },
      clock: () => new Date(),
      wake: () => {},
      storeDeadlineMs: 50,
    });
    const refused = await inbox.store({ kind: 'slack.click', payload: approval('prp_race'), proposalId: 'prp_race' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(InboxUnavailable);
    const [claimed] = await jobs.list({});
    expect(claimed).toBeDefined();
    const handler = vi.fn(async () => {});
    const run = inbox.guard(handler)(approval('prp_race'), { signal: new AbortController().signal, attempt: 1, jobId: claimed?.id ?? 0 });
    answerArrives();
    await run;
    expect(handler).not.toHaveBeenCalled();
    await database.close();
  });
});

describe('the inbox on a database that refuses the write', () => {
  it('rejects the click at once as not stored, so the platforms answer with the words', async () => {
    const database = await openTestDatabase('pglite');
    await database.db.execute(sql`alter table jobs rename to jobs_elsewhere`);
    const inbox = createClickInbox({ jobs: createJobStore(database.db), clock: () => new Date(), wake: () => {} });
    const refused = await inbox.store({ kind: 'slack.click', payload: approval('prp_x'), proposalId: 'prp_x' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(InboxUnavailable);
    // The reason that is logged is the driver's, not a statement repeating the click.
    expect(String((refused as Error).message)).not.toMatch(/U0CLICKER|prp_x/);
    await database.close();
  });
});
