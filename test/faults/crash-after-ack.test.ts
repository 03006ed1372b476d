import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startFakeDiscord, type FakeDiscord } from '../discord/fake-discord.js';
import { ALICE, APPLICATION_ID, CHANNEL, buttonPress, makeSigner } from '../discord/helpers.js';
import { startFakeSlack, type FakeSlack } from '../slack/support/fake-slack.js';
import { BOT_TOKEN as SLACK_BOT_TOKEN, SIGNING_SECRET, buttonClick, interactionBody, slackHeaders } from '../slack/support/slack-requests.js';
import { callAdminSocket } from '../../src/admin/socket.js';
import { runAdminOperation } from '../../src/admin/operations.js';
import { parseConfig } from '../../src/config/config-file.js';
import { createServices } from '../../src/runtime/services.js';
import { drivers, openTestDatabase } from '../support/database.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import { configYaml, payoutOperation, upgradePlanOperation } from '../support/operations.js';
import { freePort, PROCESS_TEST_TIMEOUT_MS, startServerProcess } from '../support/processes.js';

/**
 * Fault 5(b): `kill -9` of twokey in the middle of a burst of chat clicks and agent commits. Every
 * click or commit that was answered as accepted must be applied after a restart (the click was
 * stored before its answer), and no operation may run twice except the documented re-invocation of
 * an execution whose process died, with the same Idempotency-Key.
 */

const EXECUTOR_SECRET = 'crash-after-ack-executor-secret';
const DISCORD_BOT_TOKEN = 'crash-after-ack-discord-bot-token';
const SLACK_CLICKS = 30;
const DISCORD_CLICKS = 30;
const COMMITS = 20;
/**
 * Answers in the second wave before the kill (of 50): its clicks are answered first (stored), then
 * the commits (executed): some of those are answered, the rest never are.
 */
const KILL_AFTER_ANSWERS = 36;

type Outcome = { kind: 'slack' | 'discord' | 'commit'; proposalId: string; acked: boolean };
type AuditEvent = { seq: number; type: string; actor: string; proposalId: string | null };

describe.each(drivers)('kill -9 mid-burst of clicks and commits (%s)', (driver) => {
  let dir: string;
  let env: Record<string, string>;
  let slack: FakeSlack;
  let discord: FakeDiscord;
  let downstream: FakeDownstream;
  const signer = makeSigner();
  let closeDatabase = async () => {};
  /**
   * What an operator's CLI does, without a process per call: through the running server's admin
   * socket on the embedded database, on the database itself on PostgreSQL.
   */
  let operator: (operation: string, args: Record<string, unknown>) => Promise<unknown>;

  /** The whole audit log (the agent API's rate limit would not allow reading 80 proposals a few times a second). */
  async function auditLog(): Promise<AuditEvent[]> {
    const events: AuditEvent[] = [];
    for (;;) {
      const page = (await operator('audit.list', { afterSeq: events.at(-1)?.seq ?? 0 })) as AuditEvent[];
      events.push(...page);
      if (page.length < 500) return events;
    }
  }

  beforeAll(async () => {
    [slack, discord, downstream] = await Promise.all([
      startFakeSlack(),
      startFakeDiscord({ applicationId: APPLICATION_ID }),
      startFakeDownstream(EXECUTOR_SECRET),
    ]);
    dir = await mkdtemp(join(tmpdir(), 'twokey-crash-after-ack-'));
    const executor = (path: string) => `{ type: http, url: "${downstream.url}${path}", secret: "${EXECUTOR_SECRET}", timeout: 2s }`;
    const approvers = ['slack:U0ALICE', `discord:user:${ALICE}`];
    const config = configYaml([
      upgradePlanOperation({ approvers, quorum: 1, slack: 'C0APPROVALS', discord: CHANNEL, commit: 'on_approve', executor: executor('/upgrade') }),
      payoutOperation({ approvers, quorum: 1, commit: 'agent', executor: executor('/payout') }),
    ]);
    await writeFile(join(dir, 'twokey.yaml'), config);
    let databaseUrl = '';
    operator = (operation, args) => callAdminSocket(join(dir, 'data'), operation, args);
    if (driver === 'postgres') {
      const database = await openTestDatabase('postgres');
      databaseUrl = database.url ?? '';
      closeDatabase = () => database.close();
      const services = createServices({ database, config: parseConfig(config, {}, 'crash-after-ack') });
      operator = (operation, args) => runAdminOperation(services, operation, args);
    }
    env = {
      TWOKEY_CONFIG: join(dir, 'twokey.yaml'),
      TWOKEY_DATA_DIR: join(dir, 'data'),
      DATABASE_URL: databaseUrl,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      SLACK_BOT_TOKEN,
      SLACK_SIGNING_SECRET: SIGNING_SECRET,
      SLACK_API_URL: slack.url,
      DISCORD_BOT_TOKEN,
      DISCORD_APPLICATION_ID: APPLICATION_ID,
      DISCORD_PUBLIC_KEY: signer.publicKeyHex,
      DISCORD_API_URL: discord.apiUrl,
    };
  });
  afterAll(async () => {
    await Promise.all([slack?.close(), discord?.close(), downstream?.close()]);
    await closeDatabase();
    await rm(dir, { recursive: true, force: true });
  });

  /** Signed as Slack signs: v0 HMAC over the timestamp and the raw body. */
  const slackApprove = (url: string, proposalId: string) => {
    const body = interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId, userId: 'U0ALICE' }));
    return fetch(`${url}/slack/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...slackHeaders(body, Math.floor(Date.now() / 1000)) },
      body,
    }).then(async (response) => ({ ok: response.status === 200, text: await response.text() }));
  };

  /** Signed as Discord signs: Ed25519 over the timestamp and the raw body; acknowledged as a deferred update. */
  const discordApprove = (url: string, proposalId: string) => {
    const body = JSON.stringify(buttonPress(`twokey:approve:${proposalId}`, { userId: ALICE }));
    return fetch(`${url}/discord/interactions`, { method: 'POST', headers: signer.headers(body, Math.floor(Date.now() / 1000)), body }).then(
      async (response) => ({ ok: response.status === 200 && ((await response.json()) as { type?: number }).type === 6 }),
    );
  };

  it(
    'after a restart every acknowledged click and commit is applied, and each operation ran once (or was resumed with its key)',
    async () => {
      const first = await startServerProcess({ ...env, PORT: String(await freePort()) });
      const { apiKey } = (await operator('agents.create', { name: 'crashy' })) as { apiKey: string };
      const decided = async (type: string, ids: readonly string[], actor?: string) => {
        const events = (await auditLog()).filter((event) => event.type === type && (!actor || event.actor === actor));
        return ids.filter((id) => events.some((event) => event.proposalId === id));
      };
      const agent = (url: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}) =>
        fetch(`${url}${path}`, {
          method: init.body === undefined ? 'GET' : 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...init.headers },
          ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
        });
      const confirmTokens = new Map<string, string>();
      const propose = async (operation: string, params: Record<string, unknown>): Promise<string> => {
        const created = (await (await agent(first.url, '/v1/proposals', { body: { operation, params } })).json()) as { id: string; confirmToken: string };
        confirmTokens.set(created.id, created.confirmToken);
        return created.id;
      };
      const amountOf = (index: number) => 100 + index;

      const forSlack = await Promise.all(Array.from({ length: SLACK_CLICKS }, (_, i) => propose('upgrade_plan', { org: `slack-${i}`, plan: 'pro' })));
      const forDiscord = await Promise.all(Array.from({ length: DISCORD_CLICKS }, (_, i) => propose('upgrade_plan', { org: `discord-${i}`, plan: 'pro' })));
      const payouts = await Promise.all(Array.from({ length: COMMITS }, (_, i) => propose('payout', { amount_cents: amountOf(i) })));
      // The payouts are approved beforehand; the agent commits them during the burst.
      await Promise.all(payouts.map((id) => slackApprove(first.url, id)));
      await vi.waitFor(async () => expect(await decided('proposal.approved', payouts)).toHaveLength(COMMITS), { timeout: 30_000, interval: 200 });

      // Wave 1: half the clicks, decided while the downstream is slow, so some are mid-execution at the kill.
      downstream.setBehaviour('slow', 400);
      const outcomes: Outcome[] = [];
      let answers = 0;
      const track = (kind: Outcome['kind'], proposalId: string, sent: Promise<{ ok: boolean }>, killAt: number | null) =>
        sent.then(
          ({ ok }) => {
            outcomes.push({ kind, proposalId, acked: ok });
            answers += 1;
            if (killAt !== null && answers === killAt) first.child.kill('SIGKILL');
          },
          () => outcomes.push({ kind, proposalId, acked: false }),
        );
      const half = (ids: string[]) => ids.slice(0, ids.length / 2);
      const rest = (ids: string[]) => ids.slice(ids.length / 2);
      await Promise.all([
        ...half(forSlack).map((id) => track('slack', id, slackApprove(first.url, id), null)),
        ...half(forDiscord).map((id) => track('discord', id, discordApprove(first.url, id), null)),
      ]);
      await vi.waitFor(() => expect(downstream.requests.filter((r) => r.path === '/upgrade').length).toBeGreaterThan(0), { timeout: 20_000, interval: 10 });

      // Wave 2: the other clicks and every commit at once; the process dies part-way through the answers.
      downstream.setBehaviour('ok');
      const killAt = answers + KILL_AFTER_ANSWERS;
      await Promise.all([
        ...rest(forSlack).map((id) => track('slack', id, slackApprove(first.url, id), killAt)),
        ...rest(forDiscord).map((id) => track('discord', id, discordApprove(first.url, id), killAt)),
        ...payouts.map((id, i) =>
          track(
            'commit',
            id,
            agent(first.url, `/v1/proposals/${id}/commit`, {
              body: { operation: 'payout', params: { amount_cents: amountOf(i) } },
              headers: { 'idempotency-key': `commit-${id}`, 'x-confirmation-token': confirmTokens.get(id) ?? '' },
            }).then((response) => ({ ok: response.status === 200 })),
            killAt,
          ),
        ),
      ]);
      if (first.child.exitCode === null && first.child.signalCode === null) first.child.kill('SIGKILL');
      await new Promise((done) => (first.child.exitCode !== null || first.child.signalCode !== null ? done(null) : first.child.once('close', done)));

      const second = await startServerProcess({ ...env, PORT: String(await freePort()) });
      try {
        const approverOf = { slack: 'slack:U0ALICE', discord: `discord:user:${ALICE}` } as const;
        /**
         * Applied: a click's approval is recorded and approved its proposal (whose execution then
         * commits, or fails on its own account: a timeout on this loaded machine is the executor's
         * outcome, not a lost click); a commit committed.
         */
        const notApplied = async (of: Outcome[]) => {
          const log = await auditLog();
          const has = (id: string, type: string, actor?: string) => log.some((e) => e.proposalId === id && e.type === type && (!actor || e.actor === actor));
          return of
            .filter(({ kind, proposalId }) =>
              kind === 'commit'
                ? !has(proposalId, 'proposal.committed')
                : !has(proposalId, 'approval.recorded', approverOf[kind]) || !has(proposalId, 'proposal.approved'),
            )
            .map((outcome) => outcome.proposalId);
        };
        const acked = outcomes.filter((outcome) => outcome.acked);
        // Recovery: stored clicks run at start (embedded) or once their short lease ends (PostgreSQL);
        // an execution whose process died is resumed once its own lease ends (timeout 2 s + 5 s).
        const lost = await vi
          .waitFor(async () => expect(await notApplied(acked)).toEqual([]), { timeout: 45_000, interval: 250 })
          .then(
            (): string[] => [],
            () => notApplied(acked),
          );

        const all = [...forSlack, ...forDiscord, ...payouts];
        /**
         * The executor's calls, counted by Idempotency-Key, against the audit log read after them (an
         * `execution.resumed` is committed before its call, and reaches the log within a moment).
         */
        const executions = async () => {
          const invocations = new Map<string, number>();
          for (const request of downstream.requests) invocations.set(request.idempotencyKey ?? '', (invocations.get(request.idempotencyKey ?? '') ?? 0) + 1);
          const log = await auditLog();
          const eventsOf = (id: string, type: string) => log.filter((event) => event.proposalId === id && event.type === type).length;
          const repeated = [...invocations].filter(([, count]) => count > 1).map(([key]) => key);
          return {
            invocations,
            repeated,
            foreignKeys: [...invocations.keys()].filter((key) => !all.includes(key)),
            repeatedWithoutResume: repeated.filter((id) => eventsOf(id, 'execution.resumed') === 0),
            committedTwice: all.filter((id) => eventsOf(id, 'proposal.committed') > 1),
          };
        };
        // Every call carried its proposal's id as the key; a second call with it only when that execution was resumed.
        const { invocations, repeated } = await vi.waitFor(
          async () => {
            const seen = await executions();
            expect({ foreign: seen.foreignKeys, unexplained: seen.repeatedWithoutResume, twice: seen.committedTwice }).toEqual({
              foreign: [],
              unexplained: [],
              twice: [],
            });
            return seen;
          },
          { timeout: 15_000, interval: 250 },
        );

        const count = (kind: Outcome['kind'], of: readonly { kind: Outcome['kind'] }[]) => of.filter((o) => o.kind === kind).length;
        const unanswered = outcomes.filter((o) => !o.acked);
        const unansweredApplied = unanswered.length - (await notApplied(unanswered)).length;
        const lostOutcomes = acked.filter((o) => lost.includes(o.proposalId));
        console.log(
          `kill -9 mid-burst (${driver}): acked slack ${count('slack', acked)}/${SLACK_CLICKS}, discord ${count('discord', acked)}/${DISCORD_CLICKS}, ` +
            `commits ${count('commit', acked)}/${COMMITS}; applied: ${acked.length - lost.length} of ${acked.length} acked ` +
            `(lost: slack ${count('slack', lostOutcomes)}, discord ${count('discord', lostOutcomes)}, commits ${count('commit', lostOutcomes)}), ` +
            `${unansweredApplied} of ${unanswered.length} unanswered; ` +
            `executed: ${invocations.size} proposals, ${downstream.requests.length} calls, ${repeated.length} resumed with the same key`,
        );
        expect(lost).toEqual([]);
      } finally {
        await second.stop();
      }
    },
    PROCESS_TEST_TIMEOUT_MS,
  );
});
