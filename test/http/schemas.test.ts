import { Ajv2020 } from 'ajv/dist/2020.js';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentPath } from '../../scripts/openapi-document.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

type Document = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>>; components: object };

/** The JSON schema the committed document gives for an answer: exact status first, then 4XX/5XX. */
function answerSchema(document: Document, path: string, method: string, status: number): object {
  const responses = document.paths[path]?.[method]?.responses ?? {};
  const response = responses[String(status)] ?? responses[`${String(status)[0]}XX`];
  const schema = response?.content?.['application/json']?.schema;
  if (!schema) throw new Error(`the document has no JSON answer for ${method.toUpperCase()} ${path} ${status}`);
  return schema;
}

describe.each(drivers)('route schemas (%s)', (driver) => {
  let twokey: TestTwokey;
  let apiKey: string;
  let document: Document;
  const ajv = new Ajv2020({ strict: false, allErrors: true });

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver });
    ({ apiKey } = await twokey.createAgent('argus', { owners: ['web:owner'] }));
    document = JSON.parse(await readFile(documentPath, 'utf8')) as Document;
    ajv.addSchema({ $id: 'doc', components: document.components });
  });
  afterAll(() => twokey.close());

  function expectDocumented(path: string, method: string, answer: { status: number; body: unknown }) {
    // Refs point into the document's components, registered above as "doc".
    const schema = JSON.parse(JSON.stringify(answerSchema(document, path, method, answer.status)).replaceAll('"#/components/', '"doc#/components/'));
    const validate = ajv.compile(schema);
    expect(validate(answer.body), `${method.toUpperCase()} ${path} ${answer.status}: ${ajv.errorsText(validate.errors)}`).toBe(true);
  }

  it('answers exactly as the committed document says, success and failure alike', async () => {
    const params = { org: 'acme', plan: 'scale' };
    expectDocumented('/v1/operations', 'get', await twokey.request('GET', '/v1/operations', { apiKey }));
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params } });
    expect(proposed.status).toBe(201);
    expectDocumented('/v1/proposals', 'post', proposed);
    const id: string = proposed.body.id;
    expectDocumented('/v1/proposals/{id}', 'get', await twokey.request('GET', `/v1/proposals/${id}`, { apiKey }));

    const early = await twokey.request('POST', `/v1/proposals/${id}/commit`, {
      apiKey,
      headers: { 'x-confirmation-token': proposed.body.confirmToken },
      body: { operation: 'upgrade_plan', params },
    });
    expect(early).toMatchObject({ status: 403, body: { error: { code: 'not_approved' } } });
    expectDocumented('/v1/proposals/{id}/commit', 'post', early);

    await twokey.services.proposals.approve(id, { identity: 'web:alice', via: 'test' });
    const committed = await twokey.request('POST', `/v1/proposals/${id}/commit`, {
      apiKey,
      headers: { 'x-confirmation-token': proposed.body.confirmToken },
      body: { operation: 'upgrade_plan', params },
    });
    expect(committed).toMatchObject({ status: 200, body: { status: 'committed', outcome: { outcome: 'committed', userConsent: true } } });
    expectDocumented('/v1/proposals/{id}/commit', 'post', committed);
    const view = await twokey.request('GET', `/v1/proposals/${id}`, { apiKey });
    expect(view.body).toMatchObject({ decision: { by: 'web:alice' }, outcome: { outcome: 'committed', decidedBy: ['web:alice'] } });
    expect(view.body).not.toHaveProperty('confirmToken');
    expectDocumented('/v1/proposals/{id}', 'get', view);

    const other = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'delete_workspace', params: { workspace: 'w' } } });
    const cancelled = await twokey.request('POST', `/v1/proposals/${other.body.id}/cancel`, { apiKey });
    expect(cancelled).toMatchObject({ status: 200, body: { status: 'cancelled', decision: { by: 'agent:argus' }, outcome: { outcome: 'cancelled' } } });
    expectDocumented('/v1/proposals/{id}/cancel', 'post', cancelled);
    expectDocumented('/v1/proposals/{id}/cancel', 'post', await twokey.request('POST', `/v1/proposals/${other.body.id}/cancel`, { apiKey }));

    const discovered = await twokey.request('POST', '/agp/discover', { apiKey, body: { businessId: 'echo' } });
    expect(discovered.status).toBe(200);
    expectDocumented('/agp/discover', 'post', discovered);
    const refused = await twokey.request('POST', '/agp/discover', { apiKey, body: { businessId: 'echo', extra: 1 } });
    expectDocumented('/agp/discover', 'post', refused);
    expectDocumented('/healthz', 'get', await twokey.request('GET', '/healthz'));
    expectDocumented('/readyz', 'get', await twokey.request('GET', '/readyz'));
  });

  it('names every bad field of a request body, one detail each, and stores nothing', async () => {
    const before = (await twokey.services.store.listProposals({ limit: 10_000 })).length;
    const response = await twokey.request('POST', '/v1/proposals', {
      apiKey,
      body: { params: ['not', 'an', 'object'], callbackUrl: 'ftp://example.test/', summary: 'trust me', note: 1 },
    });
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('invalid_request');
    const details: Array<{ path: string; message: string }> = response.body.error.details;
    expect(details.map((detail) => detail.path).sort()).toEqual(['', '', '/callbackUrl', '/operation', '/params']);
    expect(
      details
        .filter((detail) => detail.path === '')
        .map((detail) => detail.message)
        .sort(),
    ).toEqual(['unknown property "note"', 'unknown property "summary"']);
    for (const field of ['operation', 'params', 'callbackUrl', 'summary', 'note']) expect(response.body.error.message).toContain(field);
    expect((await twokey.services.store.listProposals({ limit: 10_000 })).length).toBe(before);
  });

  it('keeps the AGP error shape (top-level message) for schema errors', async () => {
    const response = await twokey.request('POST', '/agp/query', { apiKey, body: { businessId: '', request: 'menu' } });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ code: 'invalid_request', requestId: expect.stringMatching(/^req_/) });
    expect(response.body.error.details.map((detail: { path: string }) => detail.path).sort()).toEqual(['/businessId', '/request']);
    expect(response.body.message).toBe(response.body.error.message);
  });
});
