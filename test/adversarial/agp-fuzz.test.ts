import fc from 'fast-check';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startFakePizzeria, type FakePizzeria } from '../agp/fake-business.js';
import { startAgpTwokey, type AgpTwokey } from '../agp/support.js';

const ROUTES = ['/agp/discover', '/agp/query', '/agp/execute/prepare', '/agp/execute'];
const BUSINESSES = ['echo', 'joes-pizza', 'joes-pizza-approved', 'echo-approved'];
/** Under `strict` (ceiling 100 cents) these still prepare. */
const ORDERS = {
  echo: { serviceId: 'order', items: [{ productId: 'echo-widget-1', quantity: 2 }] },
  'joes-pizza': { action: 'order', items: [{ productId: 'pepperoni', quantity: 1 }], amount_cents: 99 },
  'echo-approved': { serviceId: 'order', amount_cents: 100 },
} satisfies Record<string, Record<string, unknown>>;

/**
 * Property-based fuzzing of the AGP dialect (`POST /agp/discover | query | execute/prepare | execute`):
 * whatever arrives, the answer is never a 5xx, every refusal has the documented error body, a refused
 * request changes nothing (AGP tokens and Idempotency-Keys included), and the process keeps serving.
 */
describe.each(drivers)('AGP under fuzzing (%s)', (driver) => {
  let pizzeria: FakePizzeria;

  beforeAll(async () => {
    pizzeria = await startFakePizzeria();
  });
  afterAll(() => pizzeria.close());

  describe.each(['confirm', 'strict'] as const)('AGENR_EXECUTE_POLICY=%s', (policy) => {
    let twokey: AgpTwokey;
    let apiKey: string;
    let otherKey: string;
    /** Executes prepared in advance, by either agent, for the orders above. */
    const prepared: Array<{ key: string; businessId: string; request: Record<string, unknown>; token: string }> = [];
    const tokens: string[] = [];

    beforeAll(async () => {
      twokey = await startAgpTwokey({ driver, pizzeriaUrl: pizzeria.url, policy });
      ({ apiKey } = await twokey.createAgent('argus', { owners: ['web:owner'] }));
      ({ apiKey: otherKey } = await twokey.createAgent('mallory'));
      for (const key of [apiKey, apiKey, otherKey]) {
        for (const [businessId, request] of Object.entries(ORDERS)) {
          const answer = await twokey.agpRequest('/agp/execute/prepare', { apiKey: key, body: { businessId, request } });
          expect(answer.status, JSON.stringify(answer.body)).toBe(200);
          tokens.push(answer.body.confirmationToken);
          prepared.push({ key, businessId, request, token: answer.body.confirmationToken });
        }
      }
    });
    afterAll(() => twokey.close());

    async function snapshot(): Promise<string> {
      const result = await twokey.services.database.db.execute(sql`
        select (select count(*) from proposals)::int as proposals,
               (select count(*) from approvals)::int as approvals,
               (select count(*) from audit_events)::int as audit,
               (select count(*) from jobs)::int as jobs,
               (select string_agg(status || coalesce(consumed_at::text, ''), ',' order by id) from proposals) as states,
               (select string_agg(kind || coalesce(consumed_at::text, '') || coalesce(data::text, ''), ',' order by token_hash) from agp_tokens) as tokens,
               (select string_agg(key || status || coalesce(response_status::text, ''), ',' order by agent_id, key) from idempotency_keys) as keys`);
      const rows = Array.isArray(result) ? result : (result as { rows: unknown[] }).rows;
      return JSON.stringify(rows[0]);
    }

    /** Any string, NUL and lone surrogates included (what PostgreSQL refuses to store). */
    const text = (maxLength?: number) =>
      fc.oneof(fc.string({ maxLength }), fc.string({ unit: 'binary', maxLength }), fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfff', '\ud83d\ude00'));
    const json = (maxDepth?: number) => fc.oneof(fc.jsonValue({ maxDepth }), fc.jsonValue({ maxDepth, stringUnit: 'binary' }));
    /** Header text a real HTTP client could send: Node refuses anything else before fastify sees it. */
    const headerText = (maxLength: number) => text(maxLength).map((value) => value.replace(/[^\t\x20-\x7e\x80-\xff]/g, ''));

    const paths = () =>
      fc.oneof(
        { arbitrary: fc.constantFrom(...ROUTES), weight: 8 },
        fc.constantFrom(
          '/agp',
          '/agp/',
          '/agp/execute/',
          '/agp/EXECUTE',
          '/agp/execute?x=1',
          '/agp/execute/prepare/..',
          '/agp//execute',
          '/agp/execute%2Fprepare',
          '/agp/%zz',
          '/agp/execute%',
          '/agp/%ED%A0%80',
          '/agp/execute%00',
          '/agp/execute?%00',
        ),
        text(20).map((rest) => `/agp/${encodeURIComponent(rest.replace(/[\ud800-\udfff]/g, ''))}`),
      );

    const amounts = () => fc.oneof(fc.integer({ min: -1000, max: 100_000 }), fc.double(), text(8), fc.constantFrom('50', '1e3', ' ', 'NaN', null, true));
    const requests = () =>
      fc.oneof(
        fc.constantFrom(...Object.values(ORDERS)),
        fc.record(
          {
            serviceId: fc.oneof(fc.constantFrom('order', 'catalog', 'ping', 'menu'), text(10)),
            action: fc.oneof(fc.constantFrom('order', 'close'), text(10)),
            items: fc.oneof(
              fc.array(fc.record({ productId: fc.oneof(fc.constantFrom('echo-widget-1', 'pepperoni'), text()), quantity: json() }), { maxLength: 3 }),
              json(),
            ),
            amount_cents: amounts(),
            amount: amounts(),
            simulate: fc.constantFrom('failure', 'expired'),
            confirmationToken: fc.oneof(text(20), fc.constant('echo-confirm-1')),
          },
          { requiredKeys: [] },
        ),
        fc.dictionary(text(10), json(3), { maxKeys: 5 }),
      );

    const businessIds = () =>
      fc.oneof(
        { arbitrary: fc.constantFrom(...BUSINESSES), weight: 4 },
        text(70),
        fc.constantFrom('', 'ECHO', 'echo ', 'echo\u0000', '__proto__', 'constructor'),
      );

    const bodies = () =>
      fc.oneof(
        { arbitrary: fc.record({ businessId: businessIds(), request: requests() }).map((body) => JSON.stringify(body)), weight: 4 },
        fc.record({ businessId: businessIds() }).map((body) => JSON.stringify(body)),
        fc
          .record({ businessId: fc.oneof(businessIds(), json()), request: fc.oneof(requests(), json()), extra: json() }, { requiredKeys: [] })
          .map((body) => JSON.stringify(body)),
        json().map((value) => JSON.stringify(value)),
        text(200),
        fc.constantFrom(
          '{"businessId":"echo","request":{"serviceId":"catalog"},"__proto__":{"admin":true}}',
          '{"businessId":"echo","request":{"__proto__":{"amount_cents":1}}}',
          '{"businessId":"echo","request":{"constructor":{"prototype":{"polluted":1}}}}',
          '{"businessId":"echo","request":{}}{"businessId":"echo"}',
          '',
        ),
        fc.nat({ max: 3000 }).map((depth) => `{"businessId":"echo","request":{"a":${'['.repeat(depth)}${']'.repeat(depth)}}}`),
      );

    const authorizations = () =>
      fc.oneof(
        { arbitrary: fc.constantFrom(`Bearer ${apiKey}`, `Bearer ${otherKey}`), weight: 6 },
        fc.constantFrom(
          undefined,
          '',
          'Bearer',
          `bearer ${apiKey}`,
          `Bearer  ${apiKey}`,
          `Basic ${apiKey}`,
          `Bearer ${apiKey}x`,
          `Bearer ${apiKey.slice(0, -1)}`,
          `Bearer tk_agent_${'A'.repeat(43)}`,
        ),
        headerText(80),
      );

    const confirmationTokens = () =>
      fc.oneof(
        fc.constant(undefined),
        { arbitrary: fc.constantFrom(...tokens), weight: 3 },
        fc.constantFrom(...tokens).map((token) => ` ${token} `),
        fc.constantFrom(...tokens).map((token) => token.slice(0, -1)),
        fc.constantFrom(...tokens).map((token) => [token, token]),
        fc
          .string({ unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'), minLength: 43, maxLength: 43 })
          .map((rest) => `tk_conf_${rest}`),
        headerText(80),
      );

    const idempotencyKeys = () =>
      fc.oneof(
        fc.constant(undefined),
        fc.constantFrom('order-1', 'order-2', ' order-1 ', '', ' ', 'k'.repeat(255), 'k'.repeat(256), 'ключ', 'a\tb'),
        fc.constantFrom('order-1', 'order-2').map((key) => [key, key]),
        headerText(300),
      );

    interface Attempt {
      method: string;
      url: string;
      payload: string;
      contentType: string;
      authorization: string | undefined;
      token: string | string[] | undefined;
      idempotencyKey: string | string[] | undefined;
    }

    const anything = (): fc.Arbitrary<Attempt> =>
      fc.record({
        method: fc.oneof({ arbitrary: fc.constant('POST'), weight: 8 }, fc.constantFrom('GET', 'PUT', 'DELETE', 'PATCH')),
        url: paths(),
        payload: bodies(),
        contentType: fc.oneof(
          { arbitrary: fc.constant('application/json'), weight: 8 },
          fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', ''),
        ),
        authorization: authorizations(),
        token: confirmationTokens(),
        idempotencyKey: idempotencyKeys(),
      });

    /** A prepared execute sent back, often exactly (it runs once, then is refused as spent), else with one thing changed. */
    const preparedExecutes = (): fc.Arbitrary<Attempt> =>
      fc
        .record({
          original: fc.constantFrom(...prepared),
          change: fc.oneof(
            { arbitrary: fc.constant(null), weight: 3 },
            fc.record({ key: fc.constantFrom(apiKey, otherKey) }),
            fc.record({ businessId: businessIds() }),
            fc.record({ request: requests() }),
            fc.record({ token: confirmationTokens() }),
          ),
          idempotencyKey: fc.oneof(fc.constant(undefined), fc.constantFrom('order-1', 'order-2'), idempotencyKeys()),
        })
        .map(({ original, change, idempotencyKey }) => {
          const sent = { ...original, ...change };
          return {
            method: 'POST',
            url: '/agp/execute',
            payload: JSON.stringify({ businessId: sent.businessId, request: sent.request }),
            contentType: 'application/json',
            authorization: `Bearer ${sent.key}`,
            token: sent.token,
            idempotencyKey,
          };
        });

    it('never answers 5xx; every refusal has the documented body and changes nothing', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.oneof({ arbitrary: anything(), weight: 3 }, preparedExecutes()),
          async ({ method, url, payload, contentType, authorization, token, idempotencyKey }) => {
            const before = await snapshot();
            const response = await twokey.app.inject({
              method: method as 'POST',
              url,
              headers: {
                ...(authorization !== undefined ? { authorization } : {}),
                ...(contentType ? { 'content-type': contentType } : {}),
                ...(token !== undefined ? { 'x-confirmation-token': token } : {}),
                ...(idempotencyKey !== undefined ? { 'idempotency-key': idempotencyKey } : {}),
              },
              ...(method === 'GET' ? {} : { payload }),
            });
            const context = `${method} ${url} ${payload}`;
            expect(response.statusCode, context).toBeLessThan(500);
            if (response.statusCode < 400) return;
            const body = response.json() as { error?: { code?: unknown; message?: unknown; requestId?: unknown }; message?: unknown };
            expect(body.error, context).toMatchObject({ code: expect.any(String), message: expect.any(String), requestId: expect.stringMatching(/^req_/) });
            // What reached an AGP route also repeats the message at the top level, for the AGP reference SDK.
            if (method === 'POST' && ROUTES.includes(url)) expect(body.message, context).toBe(body.error?.message);
            expect(await snapshot(), context).toBe(before);
          },
        ),
        { numRuns: 300 },
      );
      expect((await twokey.agpRequest('/healthz', { method: 'GET' })).status).toBe(200);
      expect(({} as Record<string, unknown>).admin).toBeUndefined();
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    }, 120_000);

    describe('regressions found by the fuzzer', () => {
      // Each was a 500: PostgreSQL stores no NUL, RFC 8785 hashing refuses lone surrogates and recursed
      // past the stack on deep nesting, and fastify answered a malformed URL in its own shape.
      const refusals: Array<[string, string]> = [
        ['/agp/execute/prepare', '{"businessId":"echo-approved","request":{"note":"a\\u0000b"}}'],
        ['/agp/execute/prepare', '{"businessId":"echo-approved","request":{"k\\u0000":1}}'],
        ['/agp/execute/prepare', '{"businessId":"echo","request":{"note":"\\ud800"}}'],
        ['/agp/execute', '{"businessId":"echo","request":{"note":"\\udfff"}}'],
        ['/agp/execute/prepare', `{"businessId":"echo","request":{"a":${'['.repeat(5000)}${']'.repeat(5000)}}}`],
        ['/agp/execute', `{"businessId":"echo","request":{"a":${'['.repeat(20000)}${']'.repeat(20000)}}}`],
        ['/agp/%zz', '{}'],
        ['/agp/execute%00', '{}'],
        // The same parser and URL checks guard the native API.
        ['/v1/proposals', '{"operation":"upgrade_plan","params":{"org":"a\\u0000","plan":"pro"}}'],
        ['/v1/proposals/%00/cancel', '{}'],
      ];

      it.each(refusals)('POST %s (case %#) → 400 in the documented shape, nothing changed', async (url, payload) => {
        const before = await snapshot();
        const response = await twokey.app.inject({
          method: 'POST',
          url,
          payload,
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-confirmation-token': tokens[0] ?? '' },
        });
        expect(response.statusCode, response.body).toBe(400);
        expect(response.json()).toMatchObject({ error: { code: 'invalid_request', message: expect.any(String), requestId: expect.stringMatching(/^req_/) } });
        expect(response.body).not.toContain('%zz');
        expect(await snapshot()).toBe(before);
      });

      it('still takes deep nesting up to the limit, and emoji (surrogate pairs)', async () => {
        const request = { a: JSON.parse(`${'['.repeat(60)}${']'.repeat(60)}`) as unknown, note: '\ud83d\ude00' };
        const response = await twokey.agpRequest('/agp/execute/prepare', { apiKey, body: { businessId: 'echo', request } });
        expect(response.status).toBe(200);
      });
    });

    it('refuses an execute with any token but the one prepared for that agent, business and request, and spends nothing', async () => {
      const fresh = await twokey.agpRequest('/agp/execute/prepare', { apiKey, body: { businessId: 'echo', request: ORDERS.echo } });
      const token = fresh.body.confirmationToken as string;
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(apiKey, otherKey),
          fc.oneof(fc.constant('echo'), businessIds()),
          fc.oneof(fc.constant(ORDERS.echo), requests()),
          fc.oneof(fc.constant(token), confirmationTokens()),
          async (key, businessId, request, presented) => {
            // The one combination that executes (and spends the token) is left to the final check.
            fc.pre(!(key === apiKey && businessId === 'echo' && JSON.stringify(request) === JSON.stringify(ORDERS.echo) && presented === token));
            const before = await snapshot();
            const response = await twokey.agpRequest('/agp/execute', {
              apiKey: key,
              headers: presented === undefined ? {} : { 'x-confirmation-token': presented as string },
              body: { businessId, request },
            });
            if (response.status === 200) {
              // Another prepared token whose exact request this happened to be: legitimately spent.
              expect(tokens).toContain(typeof presented === 'string' ? presented.trim() : presented);
              return;
            }
            expect([400, 403, 404], JSON.stringify(response.body)).toContain(response.status);
            expect(await snapshot()).toBe(before);
          },
        ),
        { numRuns: 200 },
      );
      const executed = await twokey.agpRequest('/agp/execute', {
        apiKey,
        headers: { 'x-confirmation-token': token },
        body: { businessId: 'echo', request: ORDERS.echo },
      });
      expect(executed).toMatchObject({ status: 200, body: { operation: 'execute', businessId: 'echo', status: 'succeeded' } });
    }, 120_000);
  });
});
