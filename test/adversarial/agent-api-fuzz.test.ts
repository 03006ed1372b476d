import fc from 'fast-check';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

/**
 * Property-based fuzzing of every agent endpoint: whatever arrives, the answer is never a 5xx, the
 * process keeps serving, and a refused request changes nothing in the database.
 */
describe.each(drivers)('agent API under fuzzing (%s)', (driver) => {
  let twokey: TestTwokey;
  let apiKey: string;
  let pendingId: string;
  let pendingToken: string;

  beforeAll(async () => {
    // Hundreds of valid proposals stay pending here: above the per-agent cap of 100, which has its own test.
    twokey = await startTestTwokey({ driver, rateLimit: { max: 1_000_000, timeWindowMs: 60_000 }, env: { TWOKEY_MAX_PENDING_PER_AGENT: '100000' } });
    ({ apiKey } = await twokey.createAgent('fuzzed', { owners: ['web:owner'] }));
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } } });
    pendingId = proposed.body.id;
    pendingToken = proposed.body.confirmToken;
  });
  afterAll(() => twokey.close());

  async function snapshot(): Promise<string> {
    const result = await twokey.services.database.db.execute(sql`
      select (select count(*) from proposals)::int as proposals,
             (select count(*) from approvals)::int as approvals,
             (select count(*) from audit_events)::int as audit,
             (select count(*) from jobs)::int as jobs,
             (select string_agg(status || coalesce(consumed_at::text, ''), ',' order by id) from proposals) as states`);
    const rows = Array.isArray(result) ? result : (result as { rows: unknown[] }).rows;
    return JSON.stringify(rows[0]);
  }

  const paths = () =>
    fc.oneof(
      fc.constant('/v1/proposals'),
      fc.constant('/v1/operations'),
      fc.constant(`/v1/proposals/${pendingId}`),
      fc.constant(`/v1/proposals/${pendingId}/commit`),
      fc.constant(`/v1/proposals/${pendingId}/cancel`),
      fc.string({ maxLength: 40 }).map((id) => `/v1/proposals/${encodeURIComponent(id)}/commit`),
      fc.string({ maxLength: 40 }).map((id) => `/v1/proposals/${encodeURIComponent(id)}?wait=${encodeURIComponent(id)}`),
    );

  const bodies = () =>
    fc.oneof(
      fc.jsonValue().map((value) => JSON.stringify(value)),
      fc
        .record({ operation: fc.oneof(fc.string(), fc.constant('upgrade_plan')), params: fc.jsonValue() }, { requiredKeys: [] })
        .map((value) => JSON.stringify(value)),
      fc.string({ maxLength: 200 }),
      fc.constant('{"operation":"upgrade_plan","params":{"org":"acme","plan":"pro"},"__proto__":{"admin":true}}'),
      fc.constant('{"operation":"upgrade_plan","params":{"constructor":{"prototype":{"x":1}}}}'),
    );

  it('never answers 5xx and refused requests change nothing', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST', 'PUT', 'DELETE'),
        paths(),
        bodies(),
        fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', ''),
        fc.oneof(fc.constant(`Bearer ${apiKey}`), fc.constant(''), fc.string({ maxLength: 60 }), fc.constant('Bearer tk_agent_' + 'A'.repeat(43))),
        fc.oneof(fc.constant(undefined), fc.constant(pendingToken), fc.string({ maxLength: 60 })),
        async (method, url, payload, contentType, authorization, token) => {
          const before = await snapshot();
          const response = await twokey.app.inject({
            method: method as 'GET',
            url,
            headers: {
              ...(authorization ? { authorization } : {}),
              ...(contentType ? { 'content-type': contentType } : {}),
              ...(token !== undefined ? { 'x-confirmation-token': token } : {}),
            },
            ...(method === 'GET' ? {} : { payload }),
          });
          expect(response.statusCode, `${method} ${url} ${payload}`).toBeLessThan(500);
          const body = response.json() as { error?: { code: string; message: string } };
          if (response.statusCode >= 400) {
            expect(body.error?.code).toBeTruthy();
            expect(body.error?.message).toBeTruthy();
            expect(await snapshot()).toBe(before);
          }
        },
      ),
      { numRuns: 300 },
    );
    expect((await twokey.request('GET', '/healthz')).status).toBe(200);
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  }, 120_000);

  it('params of any shape never get past the schema unless valid', async () => {
    await fc.assert(
      fc.asyncProperty(fc.dictionary(fc.string({ maxLength: 10 }), fc.jsonValue(), { maxKeys: 5 }), async (params) => {
        const before = await snapshot();
        const response = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params } });
        const valid =
          typeof params.org === 'string' &&
          ['pro', 'scale', 'enterprise'].includes(params.plan as string) &&
          Object.keys(params).every((key) => ['org', 'plan', 'amount_cents'].includes(key)) &&
          (params.amount_cents === undefined || Number.isInteger(params.amount_cents));
        expect(response.status).toBe(valid ? 201 : 400);
        if (!valid) expect(await snapshot()).toBe(before);
      }),
      { numRuns: 200 },
    );
  }, 120_000);
});
