/**
 * The least an approval bridge must do for one full chat cycle, as a process of its own beside
 * `twokey serve` (bench/run.ts measures both on the same fakes, with the same agent, click and
 * downstream): what twokey's CPU per cycle is judged against when the question is how much of it
 * is twokey's own and how much the machine's floor for the same exchanges.
 *
 * Per cycle, five statements and six HTTP exchanges, each durable step before the next:
 *   1. POST /v1/proposals (bearer key): one INSERT of the proposal, answered 201 with its id;
 *   2. chat.postMessage to Slack (form body with an Approve button, as Slack's client sends it), then
 *      one UPDATE recording the message's ts (a proposal without one is a post still owed);
 *   3. POST /slack/events: the signature checked (HMAC-SHA256 over `v0:<ts>:<body>`), the approver
 *      checked, one UPDATE pending → executing (the click stored as the decision) before the 200;
 *   4. the downstream call, signed as twokey signs it (`X-Twokey-Signature`), with the proposal id as
 *      Idempotency-Key, then one UPDATE executing → committed with the result;
 *   5. GET /v1/proposals/:id?wait=… (bearer key): one SELECT; if not yet final, the answer waits for
 *      the commit of this process, which carries the row;
 *   6. chat.update of the message to its final text.
 * No summary template, schema check, policy, audit row, outbox, rate limit, metrics or log: the
 * floor of the machine, the driver, fastify and undici for the same exchanges.
 *
 *   DATABASE_URL=… SLACK_API_URL=… SLACK_BOT_TOKEN=… SLACK_SIGNING_SECRET=… SLACK_CHANNEL=… DOWNSTREAM_URL=…
 *   EXECUTOR_SECRET=… AGENT_KEY=… APPROVER=U… node --import tsx bench/support/minimal-chat-cycle.ts
 *
 * Prints `listening <port>` once it takes requests.
 */
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { EventEmitter } from 'node:events';
import Fastify from 'fastify';
import { listenAndAnnounce } from './minimal-server.js';
import postgres from 'postgres';
import { request } from 'undici';

const required = [
  'DATABASE_URL',
  'SLACK_API_URL',
  'SLACK_BOT_TOKEN',
  'SLACK_SIGNING_SECRET',
  'SLACK_CHANNEL',
  'DOWNSTREAM_URL',
  'EXECUTOR_SECRET',
  'AGENT_KEY',
  'APPROVER',
] as const;
const env = Object.fromEntries(required.map((name) => [name, process.env[name] ?? ''])) as Record<(typeof required)[number], string>;
const missing = required.filter((name) => !env[name]);
if (missing.length > 0) throw new Error(`${missing.join(', ')} required`);

const sql = postgres(env.DATABASE_URL, { max: 4, onnotice: () => {} });
await sql`create table if not exists bench_minimal_proposals (
  id uuid primary key, operation text not null, params jsonb not null, status text not null,
  message_ts text, decided_by text, result jsonb, created_at timestamptz not null default now())`;

interface Row {
  id: string;
  status: string;
  result: unknown;
}
const committed = new EventEmitter();
committed.setMaxListeners(0);
const slackAuthorization = `Bearer ${env.SLACK_BOT_TOKEN}`;

async function slack(method: string, args: Record<string, string>): Promise<{ ts?: string }> {
  const answer = await request(`${env.SLACK_API_URL}${method}`, {
    method: 'POST',
    headers: { authorization: slackAuthorization, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(args).toString(),
  });
  return (await answer.body.json()) as { ts?: string };
}

const blocks = (id: string, text: string, buttons: boolean) =>
  JSON.stringify([
    { type: 'section', text: { type: 'mrkdwn', text } },
    ...(buttons
      ? [{ type: 'actions', elements: [{ type: 'button', action_id: 'twokey_approve', value: id, text: { type: 'plain_text', text: 'Approve' } }] }]
      : []),
  ]);

function signedSlack(rawBody: string, timestamp: string | undefined, signature: string | undefined): boolean {
  if (!timestamp || !signature || Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) return false;
  const expected = Buffer.from(`v0=${createHmac('sha256', env.SLACK_SIGNING_SECRET).update(`v0:${timestamp}:${rawBody}`).digest('hex')}`);
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

async function execute(id: string, params: unknown, channel: string, ts: string | null): Promise<void> {
  const body = JSON.stringify({ proposalId: id, params });
  const unix = Math.floor(Date.now() / 1000);
  const signature = `t=${unix},v1=${createHmac('sha256', env.EXECUTOR_SECRET).update(`${unix}.${body}`).digest('hex')}`;
  const answer = await request(`${env.DOWNSTREAM_URL}/apply`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': id, 'x-twokey-signature': signature },
    body,
  });
  const result = (await answer.body.json()) as Record<string, unknown>;
  const [row] = await sql<Row[]>`update bench_minimal_proposals set status = 'committed', result = ${sql.json(result as never)}
    where id = ${id} and status = 'executing' returning id, status, result`;
  if (row) committed.emit(id, row);
  if (ts) await slack('chat.update', { channel, ts, text: 'Committed.', blocks: blocks(id, 'Committed.', false) });
}

const app = Fastify();
app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => done(null, body));
const isAgent = (authorization: string | undefined) => authorization === `Bearer ${env.AGENT_KEY}`;

app.post('/v1/proposals', async (req, reply) => {
  if (!isAgent(req.headers.authorization)) return reply.code(401).send({ error: 'unauthorized' });
  const { operation, params } = req.body as { operation: string; params: unknown };
  const id = randomUUID();
  await sql`insert into bench_minimal_proposals (id, operation, params, status) values (${id}, ${operation}, ${sql.json(params as never)}, 'pending')`;
  void reply.code(201).send({ id, status: 'pending' });
  const channel = env.SLACK_CHANNEL;
  const posted = await slack('chat.postMessage', { channel, text: `Approve step ${id}?`, blocks: blocks(id, `Approve step ${id}?`, true) });
  await sql`update bench_minimal_proposals set message_ts = ${posted.ts ?? null} where id = ${id}`;
});

app.post('/slack/events', async (req, reply) => {
  const raw = req.body as string;
  if (!signedSlack(raw, req.headers['x-slack-request-timestamp'] as string, req.headers['x-slack-signature'] as string)) return reply.code(401).send();
  const payload = JSON.parse(new URLSearchParams(raw).get('payload') ?? '{}') as {
    user: { id: string };
    actions: Array<{ action_id: string; value: string }>;
    container: { channel_id: string; message_ts: string };
  };
  const action = payload.actions[0];
  if (action?.action_id !== 'twokey_approve' || payload.user.id !== env.APPROVER) return reply.code(200).send();
  const [decided] = await sql<Array<{ params: unknown; message_ts: string | null }>>`update bench_minimal_proposals
    set status = 'executing', decided_by = ${payload.user.id} where id = ${action.value} and status = 'pending' returning params, message_ts`;
  void reply.code(200).send();
  if (decided) await execute(action.value, decided.params, payload.container.channel_id, decided.message_ts);
});

app.get('/v1/proposals/:id', async (req, reply) => {
  if (!isAgent(req.headers.authorization)) return reply.code(401).send({ error: 'unauthorized' });
  const { id } = req.params as { id: string };
  const waitSeconds = Number((req.query as { wait?: string }).wait ?? 0);
  // Listening before the read: a commit landing between the two is not missed.
  let settle: (row: Row) => void = () => {};
  const done = new Promise<Row>((resolve) => (settle = resolve));
  committed.once(id, settle);
  const [row] = await sql<Row[]>`select id, status, result from bench_minimal_proposals where id = ${id}`;
  if (!row || row.status === 'committed' || waitSeconds <= 0) {
    committed.off(id, settle);
    return row ?? reply.code(404).send({ error: 'not_found' });
  }
  const timer = setTimeout(() => settle(row), waitSeconds * 1000);
  const answer = await done;
  clearTimeout(timer);
  committed.off(id, settle);
  return answer;
});

await listenAndAnnounce(app, () => sql.end());
