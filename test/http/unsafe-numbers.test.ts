import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unsafeNumberPointer } from '../../src/http/unsafe-numbers.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

describe('numbers beyond Number.MAX_SAFE_INTEGER', () => {
  it('are found wherever they sit, and named by JSON pointer', () => {
    expect(unsafeNumberPointer({ a: 1, b: [0, { 'c/d': 2 ** 53 }] })).toBe('/b/1/c~1d');
    expect(unsafeNumberPointer({ a: -(2 ** 53) })).toBe('/a');
    expect(unsafeNumberPointer({ a: Number.MAX_SAFE_INTEGER, b: -Number.MAX_SAFE_INTEGER, c: 1.5, d: '9007199254740993' })).toBeNull();
  });
});

describe.each(drivers)('a body with a number that would be rounded (%s)', (driver) => {
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver });
    ({ apiKey } = await twokey.createAgent('argus'));
  });
  afterAll(() => twokey.close());

  const raw = (amount: string) => `{"operation":"upgrade_plan","params":{"org":"acme","plan":"pro","amount_cents":${amount}}}`;

  it('is refused with a 400 naming the path, instead of running …992 for …993', async () => {
    const before = await twokey.services.store.listAudit({});
    const response = await twokey.request('POST', '/v1/proposals', {
      apiKey,
      body: raw('9007199254740993'),
      headers: { 'content-type': 'application/json' },
    });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ code: 'invalid_request', details: [{ path: '/params/amount_cents' }] });
    expect(response.body.error.message).toContain('/params/amount_cents');
    expect(await twokey.services.store.listAudit({})).toHaveLength(before.length);
  });

  it('takes the largest safe integer as it is', async () => {
    const response = await twokey.request('POST', '/v1/proposals', {
      apiKey,
      body: raw(String(Number.MAX_SAFE_INTEGER)),
      headers: { 'content-type': 'application/json' },
    });
    expect(response.status).toBe(201);
    expect(response.body.summary).toBe('argus is requesting to upgrade acme to the pro plan.');
  });
});
