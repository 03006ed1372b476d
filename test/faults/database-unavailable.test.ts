import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { describeOnPostgres } from '../support/database.js';
import { openBehindProxy } from '../support/tcp-proxy.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

/**
 * Every agent-facing dialect says the same thing while PostgreSQL cannot be reached (the network
 * to it cut): 503 `database_unavailable` with Retry-After, and /readyz 503 without waiting on a
 * hung probe. Before, the agent got `500 internal` and nothing told it to come back.
 */
describeOnPostgres('while the database cannot be reached', (driver) => {
  let behind: Awaited<ReturnType<typeof openBehindProxy>>;
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    behind = await openBehindProxy(driver);
    twokey = await startTestTwokey({ driver, database: behind.database });
    ({ apiKey } = await twokey.createAgent('patient'));
  });
  afterAll(async () => {
    await twokey?.close();
    await behind?.close();
  });

  it('/v1, AGP and MCP answer 503 database_unavailable with Retry-After; /readyz 503; all serve again once it is back', async () => {
    const mcpInit = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } },
    };
    const calls = [
      () => twokey.request('GET', '/v1/operations', { apiKey }),
      () => twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'o', plan: 'pro', amount_cents: 1 } } }),
      () => twokey.request('POST', '/agp/discover', { apiKey, body: { businessId: 'echo' } }),
      () => twokey.request('POST', '/mcp', { apiKey, body: mcpInit, headers: { accept: 'application/json, text/event-stream' } }),
    ];
    expect((await twokey.request('GET', '/readyz')).status).toBe(200);

    await behind.proxy.cut();
    expect((await twokey.request('GET', '/readyz')).status).toBe(503);
    for (const request of calls) {
      const answer = await request();
      expect([answer.status, answer.body?.error?.code, answer.headers['retry-after']]).toEqual([503, 'database_unavailable', '5']);
      // Neither the driver's words nor the database's address reach the agent.
      expect(JSON.stringify(answer.body)).not.toMatch(/ECONNREFUSED|CONNECTION_|127\.0\.0\.1|postgres/);
    }
    // AGP clients read the message at the top level.
    expect((await calls[2]!()).body?.message).toMatch(/cannot reach its database/);
    const logged = twokey.logs.filter((line) => line.includes('"database_unavailable"'));
    expect(logged.length).toBeGreaterThanOrEqual(calls.length);
    expect(logged.join('')).not.toContain('select');

    await behind.proxy.restore();
    await vi.waitFor(async () => expect((await twokey.request('GET', '/readyz')).status).toBe(200), { timeout: 20_000, interval: 50 });
    for (const request of calls.slice(0, 3)) expect((await request()).status).toBeLessThan(300);
    // MCP answers an event stream now, which the JSON helper does not read.
    const mcp = await twokey.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { authorization: `Bearer ${apiKey}`, accept: 'application/json, text/event-stream' },
      payload: mcpInit,
    });
    expect(mcp.statusCode).toBe(200);
  });
});
