import SwaggerParser from '@apidevtools/swagger-parser';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentPath, documentText, documentedChatEnv, sdkTypesPath, sdkTypesText } from '../../scripts/openapi-document.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

describe.each(drivers)('GET /openapi.json (%s)', (driver) => {
  let twokey: TestTwokey;
  let served: { status: number; body: any };

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, env: documentedChatEnv });
    served = await twokey.request('GET', '/openapi.json');
  });
  afterAll(() => twokey.close());

  it('serves the committed docs/openapi.json, without an API key (run `npm run openapi` after changing a route)', async () => {
    expect(served.status).toBe(200);
    expect(documentText(served.body)).toBe(await readFile(documentPath, 'utf8'));
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    expect(served.body.openapi).toBe('3.1.0');
    // The validator dereferences in place: it gets its own copy.
    await expect(SwaggerParser.validate(structuredClone(served.body))).resolves.toBeTruthy();
  });

  it('documents the agent API, AGP, health and chat routes, with the Bearer agent key, and leaves the console out', () => {
    const paths = Object.keys(served.body.paths).sort();
    expect(paths).toEqual(
      [
        '/agp/discover',
        '/agp/execute',
        '/agp/execute/prepare',
        '/agp/query',
        '/discord/interactions',
        '/healthz',
        '/metrics',
        '/readyz',
        '/slack/events',
        '/teams/messages',
        '/v1/operations',
        '/v1/proposals',
        '/v1/proposals/{id}',
        '/v1/proposals/{id}/cancel',
        '/v1/proposals/{id}/commit',
        '/v1/proposals/{id}/resume-state',
      ].sort(),
    );
    expect(served.body.components.securitySchemes.agentKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    for (const path of paths.filter((p) => p.startsWith('/v1/') || p.startsWith('/agp/'))) {
      for (const operation of Object.values(served.body.paths[path]) as Array<{ security?: unknown; tags?: string[] }>) {
        expect(operation.security, path).toEqual([{ agentKey: [] }]);
        expect(operation.tags?.length, path).toBe(1);
      }
    }
    expect(served.body.paths['/healthz'].get.security).toBeUndefined();
  });

  it('describes the outcome in the v1 views and the commit answer, and never a token in a view', () => {
    const schemas = served.body.components.schemas;
    for (const name of ['ProposalView', 'ProposalCreated', 'CommitAnswer']) {
      expect(schemas[name].properties.outcome, name).toEqual({ $ref: '#/components/schemas/Outcome' });
    }
    expect(schemas.Outcome.required).toEqual(expect.arrayContaining(['outcome', 'userConsent', 'retryable', 'reason', 'decidedBy', 'proposalId']));
    expect(Object.keys(schemas.ProposalView.properties)).not.toContain('confirmToken');
    expect(schemas.ProposalCreated.properties.confirmToken).toBeDefined();
    expect(served.body.paths['/v1/proposals/{id}'].get.responses['200'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/ProposalView',
    });
  });

  it("documents the chat endpoints' signature headers as optional, so a missing one still gets the signature check's 401", async () => {
    const slack = served.body.paths['/slack/events'].post;
    expect(slack.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ in: 'header', name: 'x-slack-signature', required: false })]));
    const discord = served.body.paths['/discord/interactions'].post;
    expect(discord.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ in: 'header', name: 'x-signature-ed25519', required: false })]));
    const unsignedSlack = await twokey.app.inject({ method: 'POST', url: '/slack/events', headers: { 'content-type': 'application/json' }, payload: '{}' });
    expect(unsignedSlack.statusCode).toBe(401);
    const unsignedDiscord = await twokey.app.inject({
      method: 'POST',
      url: '/discord/interactions',
      headers: { 'content-type': 'application/json' },
      payload: '{}',
    });
    expect(unsignedDiscord.statusCode).toBe(401);
    expect(unsignedDiscord.body).toBe('');
    const teams = served.body.paths['/teams/messages'].post;
    expect(teams.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ in: 'header', name: 'authorization', required: false })]));
    const unsignedTeams = await twokey.app.inject({ method: 'POST', url: '/teams/messages', headers: { 'content-type': 'application/json' }, payload: '{}' });
    expect(unsignedTeams.statusCode).toBe(401);
    expect(unsignedTeams.body).toBe('');
  });
});

describe('the SDK types', () => {
  it('are what openapi-typescript generates from docs/openapi.json (run `npm run openapi` after changing a route)', async () => {
    const document: unknown = JSON.parse(await readFile(documentPath, 'utf8'));
    expect(await sdkTypesText(document)).toBe(await readFile(sdkTypesPath, 'utf8'));
  });

  it('are imported as types only, so the SDK stays dependency-free at run time', async () => {
    const source = await readFile(new URL('../../packages/client/src/sdk/index.ts', import.meta.url), 'utf8');
    const imports = [...source.matchAll(/^import\s.*$/gm)].map((match) => match[0]);
    expect(imports.length).toBeGreaterThan(0);
    for (const line of imports) expect(line).toMatch(/^import type \{[^}]*\} from '\.\/api-types\.js';$/);
  });
});
