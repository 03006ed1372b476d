import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { describeOnPostgres } from '../support/database.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import { startPrivatePostgres, type PrivatePostgres } from '../support/private-postgres.js';
import { freePort, PROCESS_TEST_TIMEOUT_MS, runCli, startServerProcess } from '../support/processes.js';
import { seededRandom, shuffled } from '../support/random.js';

/**
 * PostgreSQL crashes (`pg_ctl stop -m immediate`) in the middle of a burst of approvals (console),
 * commits and proposals sent to two `twokey serve` replicas, and comes back 5 s later. Before this
 * round the replicas died with it (a postgres.js write to a closed socket, thrown from a timer).
 * Each replica must stay up, answer 503 `database_unavailable` with Retry-After meanwhile, resume
 * by itself, and every decision it acknowledged must be applied exactly once.
 */

const SECRET = 'restart-downstream-secret-0001';
const PER_KIND = 60;
const OUTAGE_MS = 5_000;

const configYaml = (downstream: string) => `
operations:
  - name: send_mailing
    description: Send a mailing
    params: { type: object, required: [list], properties: { list: { type: string } } }
    summary: "{{agent}} wants to mail {{params.list}}."
    expiresIn: 30m
    approval: { approvers: ["web:alice"], quorum: 1 }
    executor: { type: http, url: "${downstream}/mail", secret: "${SECRET}", timeout: 2s }
  - name: charge
    description: Charge a customer
    params: { type: object, required: [n], properties: { n: { type: integer } } }
    summary: "{{agent}} charges order {{params.n}}."
    expiresIn: 30m
    policy: [{ when: "params.n >= 0", decide: approve, reason: test orders are pre-approved }]
    approval: { approvers: ["web:alice"], quorum: 1 }
    commit: agent
    executor: { type: http, url: "${downstream}/charge", secret: "${SECRET}", timeout: 2s }
`;

interface Answer {
  status: number;
  code: string | null;
  retryAfter: string | null;
  body: Record<string, unknown> | null;
}

/** Status 0: no answer at all (the replica's process is gone). */
async function call(url: string, init: RequestInit = {}): Promise<Answer> {
  const response = await fetch(url, { ...init, redirect: 'manual' }).catch(() => null);
  if (!response) return { status: 0, code: null, retryAfter: null, body: null };
  const text = await response.text();
  let body: Record<string, unknown> | null = null;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // the console answers HTML
  }
  const code = (body?.error as { code?: string } | undefined)?.code ?? null;
  return { status: response.status, code, retryAfter: response.headers.get('retry-after'), body };
}

const json = (apiKey: string, body?: unknown, headers: Record<string, string> = {}): RequestInit => ({
  method: body === undefined ? 'GET' : 'POST',
  headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...headers },
  ...(body === undefined ? {} : { body: JSON.stringify(body) }),
});

/** A console session for web:alice, through a one-time link from the CLI, as a person would. */
async function consoleSession(url: string, env: Record<string, string>): Promise<{ cookie: string; csrf: string }> {
  const link = (await runCli(['approvers', 'link', 'alice'], env)).stdout.trim().split('\n').at(-1) ?? '';
  const token = new URL(link).searchParams.get('token') ?? '';
  const signedIn = await fetch(`${url}/console/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token }).toString(),
  });
  const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  const page = await (await fetch(`${url}/console`, { headers: { cookie } })).text();
  return { cookie, csrf: /name="_csrf" value="([0-9a-f]{64})"/.exec(page)?.[1] ?? '' };
}

type Kind = 'approve' | 'commit' | 'propose';
interface Task {
  kind: Kind;
  id: string;
  run(replica: string): Promise<Answer>;
}

/** The console answers a decision it made with a redirect (303); the agent API with 2xx. */
const acknowledged = (answer: Answer) => answer.status === 303 || (answer.status >= 200 && answer.status < 300);

/** A callback receiver: the outbox must deliver again once the database is back. */
async function startCallbackReceiver(): Promise<{ server: Server; url: string; deliveries: Set<string> }> {
  const deliveries = new Set<string>();
  const server = createServer((req, res) => {
    deliveries.add(String(req.headers['x-twokey-delivery']));
    req.resume().on('end', () => res.writeHead(204).end());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  return { server, url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/cb`, deliveries };
}

// The private cluster needs PostgreSQL's server binaries, which a machine with TEST_DATABASE_URL has.
describeOnPostgres('PostgreSQL crashes mid-burst and comes back 5 s later', () => {
  let cluster: PrivatePostgres;
  let downstream: FakeDownstream;
  let receiver: Awaited<ReturnType<typeof startCallbackReceiver>>;
  let dir: string;
  let env: Record<string, string>;
  const replicas: Array<Awaited<ReturnType<typeof startServerProcess>>> = [];

  beforeAll(async () => {
    [cluster, downstream, receiver] = await Promise.all([startPrivatePostgres(), startFakeDownstream(SECRET), startCallbackReceiver()]);
    dir = await mkdtemp(join(tmpdir(), 'twokey-restart-'));
    await writeFile(join(dir, 'twokey.yaml'), configYaml(downstream.url));
    env = {
      TWOKEY_CONFIG: join(dir, 'twokey.yaml'),
      TWOKEY_DATA_DIR: join(dir, 'data'),
      DATABASE_URL: cluster.url,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      TWOKEY_CALLBACK_ALLOW: '127.0.0.0/8',
      TWOKEY_MAX_PENDING_PER_AGENT: '1000',
    };
    // Both at once, as a fleet starts: the migrations run under an advisory lock.
    const ports = [await freePort(), await freePort()];
    replicas.push(...(await Promise.all(ports.map((port) => startServerProcess({ ...env, PORT: String(port) })))));
  }, PROCESS_TEST_TIMEOUT_MS);

  afterAll(async () => {
    for (const replica of replicas) await replica.stop();
    await cluster?.destroy();
    await downstream?.close();
    receiver?.server.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(
    'both replicas stay up, answer 503 database_unavailable meanwhile, resume, and apply every acknowledged decision once',
    async () => {
      const [a, b] = replicas.map((replica) => replica.url) as [string, string];
      const [created, session] = await Promise.all([runCli(['agents', 'create', 'fleet'], env), consoleSession(a, env)]);
      const apiKey = created.stdout.trim().split('\n').at(-1) ?? '';
      const propose = (url: string, operation: string, params: object) =>
        call(`${url}/v1/proposals`, json(apiKey, { operation, params, callbackUrl: receiver.url }));

      // Before the burst: proposals to approve, and pre-approved ones to commit with their tokens.
      const prepared = await Promise.all(
        Array.from({ length: PER_KIND }, async (_, i) => {
          const [mailing, charge] = await Promise.all([propose(a, 'send_mailing', { list: `list-${i}` }), propose(b, 'charge', { n: i })]);
          expect([mailing.status, charge.status, charge.body?.status]).toEqual([201, 201, 'approved']);
          return { mailing: String(mailing.body?.id), charge: { id: String(charge.body?.id), token: String(charge.body?.confirmToken), n: i } };
        }),
      );
      const mailings = prepared.map(({ mailing }) => mailing);
      const charges = prepared.map(({ charge }) => charge);
      const phases: Record<string, number> = {};
      let phaseStart = Date.now();
      const phase = (name: string) => {
        phases[name] = Date.now() - phaseStart;
        phaseStart = Date.now();
      };
      phase('prepare');

      const tasks: Task[] = shuffled(
        [
          ...mailings.map((id) => ({
            kind: 'approve' as const,
            id,
            run: (url: string) =>
              call(`${url}/console/proposals/${id}/approve`, {
                method: 'POST',
                headers: { cookie: session.cookie, 'content-type': 'application/x-www-form-urlencoded' },
                body: new URLSearchParams({ _csrf: session.csrf }).toString(),
              }),
          })),
          ...charges.map(({ id, token, n }) => ({
            kind: 'commit' as const,
            id,
            run: (url: string) =>
              call(`${url}/v1/proposals/${id}/commit`, json(apiKey, { operation: 'charge', params: { n } }, { 'x-confirmation-token': token })),
          })),
          ...Array.from({ length: PER_KIND }, (_, i) => ({
            kind: 'propose' as const,
            id: `new-${i}`,
            run: (url: string) => propose(url, 'send_mailing', { list: `burst-${i}` }),
          })),
        ],
        seededRandom(),
      );

      // The burst: 6 clients, alternating replicas; PostgreSQL crashes once a sixth of it is answered.
      const answers = new Map<Task, Answer>();
      let crashed: Promise<void> | null = null;
      let next = 0;
      const burst = Promise.all(
        Array.from({ length: 6 }, async (_, client) => {
          for (let index = next++; index < tasks.length; index = next++) {
            const task = tasks[index] as Task;
            answers.set(task, await task.run(client % 2 === 0 ? a : b));
            if (answers.size >= tasks.length / 6) crashed ??= cluster.stop('immediate');
            await new Promise((pause) => setTimeout(pause, 50));
          }
        }),
      );
      await vi.waitFor(() => expect(crashed).not.toBeNull(), { timeout: 60_000 });
      await crashed;
      const stoppedAt = Date.now();

      // During the outage: not ready, and every agent request refused the same way.
      const during = await Promise.all(
        [a, b].flatMap((url) => [
          call(`${url}/readyz`),
          call(`${url}/v1/proposals/${charges[0]?.id ?? ''}`, json(apiKey)),
          propose(url, 'send_mailing', { list: 'during-outage' }),
        ]),
      );
      // Alive (before the fix, a write postgres.js deferred to a closed socket ended both processes).
      for (const replica of replicas) expect(replica.child.exitCode, replica.output()).toBeNull();
      expect(during.map((answer) => answer.status)).toEqual([503, 503, 503, 503, 503, 503]);
      const refused = during.filter((answer) => answer.body?.error);
      expect(refused.map((answer) => [answer.code, answer.retryAfter])).toEqual(refused.map(() => ['database_unavailable', '5']));

      await new Promise((outage) => setTimeout(outage, Math.max(0, OUTAGE_MS - (Date.now() - stoppedAt))));
      await cluster.start();
      const startedAt = Date.now();
      const [readyAfterMs, electedAndListeningAfterMs] = await Promise.all([
        Promise.all(
          [a, b].map(async (url) => {
            await vi.waitFor(async () => expect((await call(`${url}/readyz`)).status).toBe(200), { timeout: 60_000, interval: 50 });
            return Date.now() - startedAt;
          }),
        ),
        resumedBackgroundWork(cluster.url).then(() => Date.now() - startedAt),
      ]);
      await burst;

      // Every answer the burst got: acknowledged, or refused as database_unavailable with Retry-After.
      const notAcknowledged = [...answers.values()].filter((answer) => !acknowledged(answer));
      expect(notAcknowledged.filter((answer) => answer.status !== 503 || answer.retryAfter !== '5').map((answer) => answer.status)).toEqual([]);
      expect(notAcknowledged.filter((answer) => answer.body !== null && answer.code !== 'database_unavailable')).toEqual([]);

      phase('burst');
      // Clients retry what was refused, as Retry-After asks: the replicas serve again.
      const retries = await Promise.all(
        tasks.filter((task) => !acknowledged(answers.get(task) as Answer)).map(async (task, i) => [task, await task.run(i % 2 ? a : b)] as const),
      );
      expect(retries.filter(([, retried]) => retried.status >= 500).map(([task, retried]) => `${task.kind} ${task.id}: ${retried.status}`)).toEqual([]);
      phase('retries');

      // Decided after the restart: their callbacks show the outbox working again.
      const decidedAfter = retries.filter(([task, retried]) => task.kind !== 'propose' && acknowledged(retried)).map(([task]) => task.id);
      await verifyOutcome({ cluster, downstream, receiver, tasks, answers, decidedAfter });
      phase('settle');
      for (const replica of replicas) expect(replica.child.exitCode, replica.output()).toBeNull();
      console.log(
        `database restart: ready again after ${readyAfterMs.join(' ms, ')} ms, elected and listening after ${electedAndListeningAfterMs} ms; burst answers: ` +
          JSON.stringify(summarise(tasks, answers)) +
          `; downstream: ${downstream.effects.size} keys executed, ${downstream.requests.length} requests; phases (ms): ${JSON.stringify(phases)}`,
      );
    },
    PROCESS_TEST_TIMEOUT_MS,
  );
});

/**
 * Resolves once, on the restarted cluster, both replicas listen again for changes (their LISTEN
 * connection reconnected by itself) and the sweeper and the audit integrator each have a leader.
 */
async function resumedBackgroundWork(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await vi.waitFor(
      async () => {
        const [row] = await sql<Array<{ listening: number; leaders: number }>>`
          select (select count(*)::int from pg_stat_activity where query ilike 'listen %') as listening,
                 (select count(*)::int from pg_locks where locktype = 'advisory' and granted) as leaders`;
        expect(row).toEqual({ listening: 2, leaders: 2 });
      },
      { timeout: 60_000, interval: 50 },
    );
  } finally {
    await sql.end({ timeout: 1 });
  }
}

function summarise(tasks: Task[], answers: Map<Task, Answer>): Record<Kind, { acknowledged: number; refused: number }> {
  const counts = { approve: { acknowledged: 0, refused: 0 }, commit: { acknowledged: 0, refused: 0 }, propose: { acknowledged: 0, refused: 0 } };
  for (const task of tasks) counts[task.kind][acknowledged(answers.get(task) as Answer) ? 'acknowledged' : 'refused'] += 1;
  return counts;
}

/** What the database and the downstream say once the fleet has settled. */
async function verifyOutcome(run: {
  cluster: PrivatePostgres;
  downstream: FakeDownstream;
  receiver: { deliveries: Set<string> };
  tasks: Task[];
  answers: Map<Task, Answer>;
  decidedAfter: string[];
}): Promise<void> {
  const sql = postgres(run.cluster.url, { max: 1, onnotice: () => {} });

  try {
    // Executions cut short by the crash run again once their claim runs out (same Idempotency-Key).
    await vi.waitFor(
      async () => {
        const [row] = await sql<Array<{ n: number }>>`select count(*)::int as n from proposals where status in ('executing', 'approved')`;
        expect(row?.n).toBe(0);
      },
      { timeout: 90_000, interval: 250 },
    );
    const rows = await sql<Array<{ id: string; status: string; approvals: number }>>`
      select p.id, p.status, (select count(*)::int from approvals a where a.proposal_id = p.id) as approvals from proposals p`;
    const byId = new Map(rows.map((row) => [row.id, row]));
    const executed = new Set(run.downstream.effects.keys());
    for (const task of run.tasks.filter((task) => task.kind !== 'propose')) {
      const row = byId.get(task.id);
      // Retried after the outage, so every one is decided now, by one approval at most, and ran.
      expect(row?.status, task.id).toBe('committed');
      expect(row?.approvals, task.id).toBeLessThanOrEqual(1);
      if (task.kind === 'approve') expect(row?.approvals, task.id).toBe(1);
    }
    // Every proposal acknowledged with a 201 exists.
    const created = [...run.answers.entries()].filter(([task, answer]) => task.kind === 'propose' && acknowledged(answer));
    expect(created.map(([, answer]) => byId.get(String(answer.body?.id))?.status)).toEqual(created.map(() => 'pending'));
    // Nothing ran that is not committed, nothing committed that did not run, and every proposal
    // left is still decidable.
    expect(rows.filter((row) => row.status === 'committed' && !executed.has(row.id)).map((row) => row.id)).toEqual([]);
    expect([...executed].filter((id) => byId.get(id)?.status !== 'committed')).toEqual([]);
    expect(rows.filter((row) => !['committed', 'pending'].includes(row.status)).map((row) => `${row.id}:${row.status}`)).toEqual([]);
    // The outbox resumed: the callbacks of what was decided after the restart arrived. (A job that
    // was delivered when the database went away, but not recorded as done, runs again when its
    // 60 s claim runs out; that is not waited for here.)
    expect(run.decidedAfter.length).toBeGreaterThan(0);
    await vi.waitFor(() => expect(run.decidedAfter.filter((id) => !run.receiver.deliveries.has(`${id}:committed`))).toEqual([]), {
      timeout: 60_000,
      interval: 100,
    });
    // Both replicas notify the others of their changes again (each notifier reconnected).
    await vi.waitFor(
      async () => {
        const [row] = await sql<Array<{ n: number }>>`select count(*)::int as n from pg_stat_activity where application_name = 'twokey-notifier'`;
        expect(row?.n).toBe(2);
      },
      { timeout: 30_000, interval: 250 },
    );
  } finally {
    await sql.end({ timeout: 1 });
  }
}
