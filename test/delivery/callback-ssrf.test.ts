import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import type { LookupAddress } from 'node:dns';
import { eq } from 'drizzle-orm';
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadEnv } from '../../src/config/env.js';
import { createAddressPolicy, createGuardedAgent, staticUrlRefusal, type Lookup } from '../../src/lib/address-guard.js';
import { jobs, proposals } from '../../src/db/schema.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

/** A local HTTP server that records what reached it and answers with `answer`. */
async function startServer(answer: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(204).end()) {
  const received: Array<{ url: string; headers: IncomingMessage['headers'] }> = [];
  const server = createServer((req, res) => {
    received.push({ url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => answer(req, res));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  return {
    port: address.port,
    url: `http://127.0.0.1:${address.port}`,
    received,
    async close() {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    },
  };
}

describe('the address policy', () => {
  const strict = createAddressPolicy(undefined);

  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.8.9.10', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['100.100.100.200', 'carrierGradeNat'],
    ['224.0.0.1', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'linkLocal'],
    ['fd00:ec2::254', 'uniqueLocal'],
    ['ff02::1', 'multicast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:169.254.169.254', 'linkLocal'],
    ['64:ff9b::a9fe:a9fe', 'rfc6052'],
  ])('refuses %s (%s)', (ip, range) => {
    expect(strict.refusal(ip)).toBe(`${range} address`);
  });

  it.each(['93.184.215.14', '8.8.8.8', '2606:4700:4700::1111'])('allows the public address %s', (ip) => {
    expect(strict.refusal(ip)).toBeNull();
  });

  it('lets the operator allow CIDRs, addresses and host names', () => {
    const allowing = createAddressPolicy('10.20.0.0/16, 192.168.1.7, hooks.internal.example, ::ffff:100.64.0.0/106');
    expect(allowing.refusal('10.20.3.4')).toBeNull();
    expect(allowing.refusal('10.21.3.4')).toBe('private address');
    expect(allowing.refusal('192.168.1.7')).toBeNull();
    expect(allowing.refusal('192.168.1.8')).toBe('private address');
    expect(allowing.refusal('100.64.1.1')).toBeNull();
    expect(allowing.allowsHostname('HOOKS.internal.example')).toBe(true);
    expect(allowing.allowsHostname('other.internal.example')).toBe(false);
  });

  it('rejects a malformed TWOKEY_CALLBACK_ALLOW at start, naming the variable', () => {
    expect(() => loadEnv({ TWOKEY_CALLBACK_ALLOW: '10.0.0.0/99' })).toThrow(/TWOKEY_CALLBACK_ALLOW/);
    expect(() => loadEnv({ TWOKEY_CALLBACK_ALLOW: 'http://x/' })).toThrow(/TWOKEY_CALLBACK_ALLOW/);
    expect(loadEnv({ TWOKEY_CALLBACK_ALLOW: '10.0.0.0/8,hooks.example' }).TWOKEY_CALLBACK_ALLOW).toBe('10.0.0.0/8,hooks.example');
  });

  it('reads a decimal IP host as the address it stands for', () => {
    expect(staticUrlRefusal('http://2130706433/hook', strict)).toMatch(/loopback/);
    expect(staticUrlRefusal('http://0x7f.1/hook', strict)).toMatch(/loopback/);
    expect(staticUrlRefusal('https://hooks.example.com/x', strict)).toBeNull();
  });
});

describe('the guarded agent', () => {
  let receiver: Awaited<ReturnType<typeof startServer>>;
  beforeAll(async () => {
    receiver = await startServer();
  }, 180_000);
  afterAll(() => receiver.close());

  it('does not connect to a refused IP literal', async () => {
    const agent = createGuardedAgent(createAddressPolicy(undefined));
    const error = await fetch(`${receiver.url}/literal`, { dispatcher: agent }).catch((e: unknown) => e);
    await agent.close();
    expect(String((error as Error).cause)).toMatch(/refused to connect to a loopback address/);
    expect(receiver.received.filter((r) => r.url === '/literal')).toHaveLength(0);
  }, 120_000);

  it('checks the address each connection resolves to, not an earlier answer (DNS rebinding)', async () => {
    // An attacker's name server: a public address the first time, loopback from then on.
    let lookups = 0;
    const rebinding: Lookup = (_hostname, _options, callback) => {
      lookups += 1;
      const answer: LookupAddress[] = lookups === 1 ? [{ address: '93.184.215.14', family: 4 }] : [{ address: '127.0.0.1', family: 4 }];
      callback(null, answer);
    };
    const agent = createGuardedAgent(createAddressPolicy(undefined), { lookup: rebinding });
    // The first connection goes to the public address (here refused by the test sandbox: no internet).
    const first = await fetch(`http://rebind.test:${receiver.port}/rebind`, { dispatcher: agent }).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(Error);
    // The second resolves to loopback: refused before any byte is sent.
    const second = await fetch(`http://rebind.test:${receiver.port}/rebind`, { dispatcher: agent }).catch((e: unknown) => e);
    await agent.close();
    expect(lookups).toBe(2);
    expect(String((second as Error).cause)).toMatch(/resolves only to refused addresses \(loopback address\)/);
    expect(receiver.received.filter((r) => r.url === '/rebind')).toHaveLength(0);
  }, 120_000);

  it('keeps only allowed addresses of a mixed answer and connects to one of those', async () => {
    const mixed: Lookup = (_hostname, _options, callback) =>
      callback(null, [
        { address: '10.0.0.5', family: 4 },
        { address: '127.0.0.1', family: 4 },
      ]);
    const agent = createGuardedAgent(createAddressPolicy('127.0.0.0/8'), { lookup: mixed });
    const response = await fetch(`http://mixed.test:${receiver.port}/mixed`, { dispatcher: agent });
    await agent.close();
    expect(response.status).toBe(204);
    // The request reached the receiver under its own name: the Host header is the URL's.
    expect(receiver.received.find((r) => r.url === '/mixed')?.headers.host).toBe(`mixed.test:${receiver.port}`);
  }, 120_000);
});

describe.each(drivers)('callbackUrl checks (%s)', (driver) => {
  let twokey: TestTwokey;
  let apiKey: string;
  beforeAll(async () => {
    // No allow-list: the production default.
    twokey = await startTestTwokey({ driver, env: { TWOKEY_CALLBACK_ALLOW: '' }, outboxPollMs: 20, outboxBackoff: { baseMs: 60_000, maxMs: 60_000 } });
    ({ apiKey } = await twokey.createAgent('ssrf'));
  }, 180_000);
  afterAll(() => twokey.close());

  it.each([
    ['http://user:pass@hooks.example.com/hook', /user name or password/],
    ['http://127.0.0.1:8080/hook', /loopback/],
    ['http://2130706433/hook', /loopback/],
    ['http://[::1]:8080/hook', /loopback/],
    ['http://localhost:8080/hook', /loopback/],
    ['http://169.254.169.254/latest/meta-data/', /linkLocal/],
    ['http://10.0.0.1/hook', /private/],
    ['http://100.64.0.1/hook', /carrierGradeNat/],
    ['http://224.0.0.1/hook', /multicast/],
    ['http://0.0.0.0/hook', /unspecified/],
    ['http://[::ffff:a9fe:a9fe]/hook', /linkLocal/],
  ])(
    'refuses %s at propose with 400 naming callbackUrl',
    async (callbackUrl, reason) => {
      const before = (await twokey.services.database.db.select().from(proposals)).length;
      const answer = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        body: { operation: 'delete_workspace', params: { workspace: 'w' }, callbackUrl },
      });
      expect(answer.status).toBe(400);
      expect(answer.body.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/^callbackUrl /) });
      expect(answer.body.error.details).toEqual([{ path: '/callbackUrl', message: expect.stringMatching(reason) }]);
      expect(JSON.stringify(answer.body)).not.toContain('pass@');
      expect((await twokey.services.database.db.select().from(proposals)).length).toBe(before);
    },
    120_000,
  );

  it('refuses at delivery a URL that points at a refused address by then, and sends nothing', async () => {
    const receiver = await startServer();
    try {
      const proposed = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        body: { operation: 'delete_workspace', params: { workspace: 'later' }, callbackUrl: 'https://hooks.example.com/hook' },
      });
      expect(proposed.status).toBe(201);
      // Accepted under an earlier, looser allow-list: the delivery-time check is what protects.
      await twokey.services.database.db
        .update(proposals)
        .set({ callbackUrl: `http://2130706433:${receiver.port}/hook` })
        .where(eq(proposals.id, proposed.body.id));
      await twokey.request('POST', `/v1/proposals/${proposed.body.id}/cancel`, { apiKey });
      await vi.waitFor(
        async () => {
          const [job] = (await twokey.services.database.db.select().from(jobs).where(eq(jobs.kind, 'callback.deliver'))).filter(
            (j) => j.payload.proposalId === proposed.body.id,
          );
          expect(job?.lastError).toMatch(/refused to connect to a loopback address/);
        },
        { timeout: 60_000 },
      );
      expect(receiver.received).toHaveLength(0);
    } finally {
      await receiver.close();
    }
  }, 120_000);
});

describe.each(drivers)('redirects (%s)', (driver) => {
  const SECRET = 'redirect-executor-secret-0001';
  let target: Awaited<ReturnType<typeof startServer>>;
  let redirector: Awaited<ReturnType<typeof startServer>>;
  let twokey: TestTwokey;
  let apiKey: string;
  let callbackSecret: string;

  beforeAll(async () => {
    target = await startServer();
    redirector = await startServer((_req, res) => res.writeHead(302, { location: `${target.url}/stolen` }).end());
    twokey = await startTestTwokey({
      driver,
      outboxPollMs: 20,
      outboxBackoff: { baseMs: 60_000, maxMs: 60_000 },
      configYaml: `
operations:
  - name: remove_member
    description: Remove a member
    params: { type: object, required: [member], properties: { member: { type: string } } }
    summary: "{{agent}} removes {{params.member}}."
    approval: { approvers: [web:alice], quorum: 1 }
    commit: agent
    executor: { type: http, url: "${redirector.url}/execute", secret: "${SECRET}", timeout: 2s }
`,
    });
    ({ apiKey, callbackSecret } = await twokey.createAgent('redirected'));
  }, 180_000);
  afterAll(async () => {
    await twokey.close();
    await redirector.close();
    await target.close();
  });

  it('a callback answered with a redirect is a failed delivery; the signed body never reaches the target', async () => {
    const proposed = await twokey.request('POST', '/v1/proposals', {
      apiKey,
      body: { operation: 'remove_member', params: { member: 'bob' }, callbackUrl: `${redirector.url}/hook` },
    });
    await twokey.request('POST', `/v1/proposals/${proposed.body.id}/cancel`, { apiKey });
    await vi.waitFor(
      async () => {
        const [job] = (await twokey.services.jobs.list({})).filter((j) => j.payload.proposalId === proposed.body.id);
        expect(job?.lastError).toMatch(/HTTP 302; redirects are not followed/);
      },
      { timeout: 60_000 },
    );
    expect(redirector.received.filter((r) => r.url === '/hook')).toHaveLength(1);
    expect(target.received).toHaveLength(0);
    expect(JSON.stringify(target.received)).not.toContain(callbackSecret);
  }, 120_000);

  it('an executor answered with a redirect fails the execution; the target never sees the call', async () => {
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'remove_member', params: { member: 'carol' } } });
    await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
    const committed = await twokey.request('POST', `/v1/proposals/${proposed.body.id}/commit`, {
      apiKey,
      headers: { 'x-confirmation-token': proposed.body.confirmToken },
      body: { operation: 'remove_member', params: { member: 'carol' } },
    });
    expect(committed).toMatchObject({ status: 502, body: { error: { code: 'execution_failed', message: expect.stringContaining('HTTP 302') } } });
    expect(redirector.received.filter((r) => r.url === '/execute')).toHaveLength(1);
    expect(target.received).toHaveLength(0);
  }, 120_000);
});
