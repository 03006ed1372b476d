/**
 * `GET /metrics` after real requests: the HTTP series by route pattern, method and status, refused
 * authentications and rate limits by reason, MCP tool calls by tool and outcome, and the outbox
 * backlog by lane and kind, read from the database at most once per 5 s of the injected clock.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobs } from '../../src/db/schema.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { configYaml, upgradePlanOperation } from '../support/operations.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { connectClient, listen } from '../mcp/support.js';

/** One sample of the Prometheus text format: its value, or undefined when no such series was exposed. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((pair) => [pair[1], pair[2]]));
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) return Number(match[3]);
  }
  return undefined;
}

describe.each(drivers)('Prometheus metrics (%s)', (driver) => {
  const clock = manualClock();
  let twokey: TestTwokey;
  let apiKey: string;
  let revokedKey: string;
  let mcp: Client;

  const scrape = async () => {
    const response = await twokey.app.inject({ method: 'GET', url: '/metrics' });
    expect(response.statusCode).toBe(200);
    return response.body;
  };

  beforeAll(async () => {
    twokey = await startTestTwokey({
      driver,
      clock,
      // Small refunds pass on a rule; the rest wait for a person (and MCP answers "pending" at once).
      configYaml: configYaml([
        upgradePlanOperation({
          approvers: ['web:alice'],
          commit: 'on_approve',
          policy: [{ when: 'params.plan == "pro"', decide: 'approve', reason: 'pro is fine' }],
        }),
      ]),
      env: { TWOKEY_MAX_FAILED_AUTH_PER_MINUTE: '3', TWOKEY_MCP_WAIT: '0' },
      rateLimit: { max: 14, timeWindowMs: 60_000 },
      // The test's own jobs must stay queued: no poll runs them, and nothing it proposes queues any.
      outboxPollMs: 3_600_000,
    });
    ({ apiKey } = await twokey.createAgent('argus'));
    ({ apiKey: revokedKey } = await twokey.createAgent('hermes'));
    await twokey.services.agents.revoke('hermes', { actor: 'operator:cli' });
    mcp = await connectClient(await listen(twokey), apiKey);
  });
  afterAll(async () => {
    await mcp?.close();
    await twokey?.close();
  });

  it('times requests by route pattern, method and status, never by the URL', async () => {
    expect((await twokey.request('GET', '/v1/operations', { apiKey })).status).toBe(200);
    expect((await twokey.request('GET', '/v1/proposals/prp_doesnotexist', { apiKey })).status).toBe(404);
    expect((await twokey.request('GET', '/no/such/route/prp_secretish')).status).toBe(404);
    const text = await scrape();
    expect(sample(text, 'twokey_http_request_duration_seconds_count', { route: '/v1/operations', method: 'GET', status: '200' })).toBe(1);
    expect(sample(text, 'twokey_http_request_duration_seconds_count', { route: '/v1/proposals/:id', method: 'GET', status: '404' })).toBe(1);
    expect(sample(text, 'twokey_http_request_duration_seconds_count', { route: 'unmatched', method: 'GET', status: '404' })).toBe(1);
    expect(sample(text, 'twokey_http_request_duration_seconds_bucket', { route: '/v1/operations', method: 'GET', status: '200', le: '+Inf' })).toBe(1);
    expect(text).not.toContain('prp_doesnotexist');
    expect(text).not.toContain('prp_secretish');
  });

  it('counts MCP tool calls by tool and outcome', async () => {
    const committed = (await mcp.callTool({ name: 'upgrade_plan', arguments: { org: 'acme', plan: 'pro' } })) as CallToolResult;
    expect(committed.structuredContent).toMatchObject({ outcome: 'committed' });
    const pending = (await mcp.callTool({ name: 'upgrade_plan', arguments: { org: 'acme', plan: 'scale' } })) as CallToolResult;
    expect(pending.structuredContent).toMatchObject({ outcome: 'pending' });
    expect(((await mcp.callTool({ name: 'upgrade_plan', arguments: { org: 'acme' } })) as CallToolResult).isError).toBe(true);
    await expect(mcp.callTool({ name: 'launch_missiles', arguments: {} })).rejects.toThrow(/unknown tool/);
    const text = await scrape();
    expect(sample(text, 'twokey_mcp_tool_calls_total', { tool: 'upgrade_plan', outcome: 'committed' })).toBe(1);
    expect(sample(text, 'twokey_mcp_tool_calls_total', { tool: 'upgrade_plan', outcome: 'pending' })).toBe(1);
    expect(sample(text, 'twokey_mcp_tool_calls_total', { tool: 'upgrade_plan', outcome: 'refused' })).toBe(1);
    expect(sample(text, 'twokey_mcp_tool_calls_total', { tool: '(unknown)', outcome: 'unknown_tool' })).toBe(1);
    expect(text).not.toContain('launch_missiles');
    // The MCP endpoint answers on a hijacked reply: still timed under its route.
    expect(sample(text, 'twokey_http_request_duration_seconds_count', { route: '/mcp', method: 'POST', status: '200' })).toBeGreaterThanOrEqual(4);
  });

  it('counts refused authentications by reason, never by key', async () => {
    await twokey.request('GET', '/v1/operations');
    await twokey.request('GET', '/v1/operations', { apiKey: 'tk_agent_unknownunknownunknownunknownunknownun' });
    await twokey.request('GET', '/v1/operations', { apiKey: revokedKey });
    const text = await scrape();
    for (const reason of ['missing_key', 'unknown_key', 'revoked_key']) {
      expect(sample(text, 'twokey_auth_refusals_total', { route: '/v1/operations', reason }), reason).toBe(1);
    }
    expect(text).not.toContain('tk_agent_');
    expect(text).not.toContain('hermes');
  });

  it('counts rate-limit refusals by the limit reached', async () => {
    // Three failed authentications so far from this address (the limit): a valid key is still served,
    // the next refused key is answered 429.
    expect((await twokey.request('GET', '/v1/operations', { apiKey })).status).toBe(200);
    expect((await twokey.request('GET', '/v1/operations', { apiKey: 'tk_agent_unknownKeyAfterTheLimit' })).status).toBe(429);
    let text = await scrape();
    expect(sample(text, 'twokey_rate_limit_refusals_total', { route: '/v1/operations', limit: 'failed_auth' })).toBe(1);
    clock.advance(60_000);

    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push((await twokey.request('GET', '/v1/operations', { apiKey })).status);
    const refused = statuses.filter((status) => status === 429).length;
    expect(refused).toBeGreaterThan(0);
    text = await scrape();
    expect(sample(text, 'twokey_rate_limit_refusals_total', { route: '/v1/operations', limit: 'requests' })).toBe(refused);
    expect(sample(text, 'twokey_http_request_duration_seconds_count', { route: '/v1/operations', method: 'GET', status: '429' })).toBe(refused + 1);
  });

  it('reports the outbox backlog by lane and kind, reading the database at most once per 5 s', async () => {
    const now = clock();
    const at = (offsetMs: number) => new Date(now.getTime() + offsetMs);
    const job = (kind: string, fields: Partial<typeof jobs.$inferInsert>) => ({
      kind,
      payload: {},
      status: 'queued',
      maxAttempts: 5,
      runAt: now,
      createdAt: at(-600_000),
      updatedAt: now,
      ...fields,
    });
    await twokey.services.database.db.insert(jobs).values([
      job('callback.deliver', { runAt: at(-90_000) }),
      job('callback.deliver', { runAt: at(-30_000) }),
      // Not due yet (a retry's backoff): depth, but no wait.
      job('callback.deliver', { runAt: at(60_000) }),
      // A claim whose worker died: due again since its lease ran out.
      job('test.report', { status: 'running', runAt: at(-300_000), lockedUntil: at(-20_000), lockedBy: 'gone:1' }),
      // A claim still held: running, not waiting.
      job('test.report', { status: 'running', runAt: at(-300_000), lockedUntil: at(40_000), lockedBy: 'alive:1' }),
    ]);
    clock.advance(5_000);
    let text = await scrape();
    expect(sample(text, 'twokey_outbox_due_jobs', { lane: 'callbacks', kind: 'callback.deliver' })).toBe(2);
    expect(sample(text, 'twokey_outbox_oldest_due_job_age_seconds', { lane: 'callbacks', kind: 'callback.deliver' })).toBe(95);
    expect(sample(text, 'twokey_outbox_due_jobs', { lane: 'other', kind: 'test.report' })).toBe(1);
    expect(sample(text, 'twokey_outbox_oldest_due_job_age_seconds', { lane: 'other', kind: 'test.report' })).toBe(25);
    expect(sample(text, 'twokey_outbox_jobs', { status: 'queued' })).toBe(3);
    expect(sample(text, 'twokey_outbox_jobs', { status: 'running' })).toBe(2);

    await twokey.services.database.db.insert(jobs).values(job('callback.deliver', { runAt: at(-1_000) }));
    clock.advance(4_999);
    text = await scrape();
    // Within 5 s of the last read: the same figures, no query.
    expect(sample(text, 'twokey_outbox_due_jobs', { lane: 'callbacks', kind: 'callback.deliver' })).toBe(2);
    clock.advance(1);
    text = await scrape();
    expect(sample(text, 'twokey_outbox_due_jobs', { lane: 'callbacks', kind: 'callback.deliver' })).toBe(3);
    expect(sample(text, 'twokey_outbox_oldest_due_job_age_seconds', { lane: 'callbacks', kind: 'callback.deliver' })).toBe(100);

    // A backlog that empties reports 0 instead of vanishing.
    await twokey.services.database.db.delete(jobs);
    clock.advance(5_000);
    text = await scrape();
    expect(sample(text, 'twokey_outbox_due_jobs', { lane: 'callbacks', kind: 'callback.deliver' })).toBe(0);
    expect(sample(text, 'twokey_outbox_oldest_due_job_age_seconds', { lane: 'other', kind: 'test.report' })).toBe(0);
  });
});
