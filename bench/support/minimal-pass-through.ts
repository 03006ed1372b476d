/**
 * The least an approval gateway must do to pass an MCP tools/call through with a durable record,
 * as a process of its own beside `twokey serve` (bench/mcp.ts measures both against the direct
 * call): fastify receives the call; one autocommitted INSERT records it as executing; undici's
 * keep-alive pool sends it to the upstream; one autocommitted UPDATE records the result; the
 * upstream's JSON-RPC answer goes back as one JSON body. Other messages (initialize, notifications)
 * are forwarded without a record. No authentication, policy, audit row or schema check: what this
 * adds over the direct call is the floor of the machine, the driver and the extra hop, and what
 * twokey adds beyond it is twokey's own.
 *
 *   DATABASE_URL=… UPSTREAM_URL=… UPSTREAM_TOKEN=… node --import tsx bench/support/minimal-pass-through.ts
 *
 * Prints `listening <port>` once it takes calls.
 */
import Fastify from 'fastify';
import { listenAndAnnounce } from './minimal-server.js';
import postgres from 'postgres';
import { Pool } from 'undici';

const databaseUrl = process.env.DATABASE_URL;
const upstreamUrl = process.env.UPSTREAM_URL;
const upstreamToken = process.env.UPSTREAM_TOKEN;
if (!databaseUrl || !upstreamUrl || !upstreamToken) throw new Error('DATABASE_URL, UPSTREAM_URL and UPSTREAM_TOKEN are required');

const sql = postgres(databaseUrl, { max: 10, onnotice: () => {} });
await sql`create table if not exists bench_minimal_calls (id bigserial primary key, tool text not null, arguments jsonb, result text, status text not null)`;
const upstream = new URL(upstreamUrl);
const pool = new Pool(upstream.origin);
const forwardedHeaders = { authorization: `Bearer ${upstreamToken}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' };

/** The JSON-RPC message of an answer sent as one SSE event or as a JSON body; null for none (202). */
function messageOf(text: string): string | null {
  if (!text) return null;
  const data = /^data: (.*)$/m.exec(text);
  return data ? data[1]! : text;
}

const app = Fastify();
app.post('/mcp', async (request, reply) => {
  const body = request.body as { method?: string; params?: { name?: string; arguments?: unknown } };
  const recorded =
    body.method === 'tools/call'
      ? (
          await sql`insert into bench_minimal_calls (tool, arguments, status) values (${body.params?.name ?? ''}, ${sql.json((body.params?.arguments ?? null) as never)}, 'executing') returning id`
        )[0]
      : undefined;
  const answer = await pool.request({ path: upstream.pathname, method: 'POST', headers: forwardedHeaders, body: JSON.stringify(body) });
  const message = messageOf(await answer.body.text());
  if (recorded) await sql`update bench_minimal_calls set result = ${message}, status = 'committed' where id = ${recorded.id} and status = 'executing'`;
  reply.hijack();
  if (message === null) reply.raw.writeHead(202).end();
  else reply.raw.writeHead(200, { 'content-type': 'application/json' }).end(message);
});
await listenAndAnnounce(app, () => Promise.all([sql.end(), pool.close()]));
