import Fastify, { type FastifyRequest } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { bearerAuthHook, bearerToken } from '../../src/lib/bearer-auth.js';

class Refused extends Error {
  statusCode = 401;
}

const principals = new WeakMap<FastifyRequest, string>();

/** A real fastify app behind the hook, with a counter that refuses after `maxFailures`. */
async function appWith(options: { maxFailures?: number; authenticate?: (token: string) => Promise<string> } = {}) {
  const failures: string[] = [];
  const app = Fastify();
  app.addHook(
    'onRequest',
    bearerAuthHook<string>({
      authenticate: options.authenticate ?? (async (token) => (token === 'good' ? 'agent_1' : Promise.reject(new Refused('unknown key')))),
      missingToken: () => new Refused('no key'),
      isRefusal: (error) => error instanceof Refused,
      attach: (request, principal) => principals.set(request, principal),
      failures: {
        recordFailure: (request, token) => {
          failures.push(`${request.ip} ${token ?? '(none)'}`);
          if (failures.length <= (options.maxFailures ?? Infinity)) return null;
          return { error: Object.assign(new Error('too many failures'), { statusCode: 429 }), retryAfterSeconds: 42 };
        },
      },
    }),
  );
  app.get('/', async (request) => ({ principal: principals.get(request) }));
  await app.ready();
  return { app, failures };
}

let open: Awaited<ReturnType<typeof appWith>>['app'] | undefined;
afterEach(async () => {
  await open?.close();
});

describe('bearerToken', () => {
  it('reads the token of a Bearer header, in any case of the scheme', () => {
    expect(bearerToken({ headers: { authorization: 'Bearer abc' } })).toBe('abc');
    expect(bearerToken({ headers: { authorization: 'bearer   abc' } })).toBe('abc');
  });

  it('is null without the header, with another scheme, or with more than one word', () => {
    expect(bearerToken({ headers: {} })).toBeNull();
    expect(bearerToken({ headers: { authorization: 'Basic YTpi' } })).toBeNull();
    expect(bearerToken({ headers: { authorization: 'Bearer a b' } })).toBeNull();
    expect(bearerToken({ headers: { authorization: 'Bearer ' } })).toBeNull();
  });
});

describe('bearerAuthHook', () => {
  it('attaches the principal of an accepted token for the handler', async () => {
    const { app, failures } = await appWith();
    open = app;
    const response = await app.inject({ url: '/', headers: { authorization: 'Bearer good' } });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ principal: 'agent_1' });
    expect(failures).toEqual([]);
  });

  it('refuses a missing or unknown token with the given errors, and counts both', async () => {
    const { app, failures } = await appWith();
    open = app;
    const missing = await app.inject({ url: '/' });
    expect(missing.statusCode).toBe(401);
    expect(missing.json().message).toBe('no key');
    const unknown = await app.inject({ url: '/', headers: { authorization: 'Bearer bad' } });
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json().message).toBe('unknown key');
    expect(failures).toHaveLength(2);
  });

  it('does not count a fault that is not a refused credential', async () => {
    const { app, failures } = await appWith({ authenticate: () => Promise.reject(new Error('database down')) });
    open = app;
    const response = await app.inject({ url: '/', headers: { authorization: 'Bearer good' } });
    expect(response.statusCode).toBe(500);
    expect(failures).toEqual([]);
  });

  it('counts each refusal with the token it carried, none for a missing header', async () => {
    const { app, failures } = await appWith();
    open = app;
    await app.inject({ url: '/' });
    await app.inject({ url: '/', headers: { authorization: 'Bearer bad' } });
    expect(failures).toEqual(['127.0.0.1 (none)', '127.0.0.1 bad']);
  });

  it('checks the token first: an accepted token is served even when its caller is far past the failure limit', async () => {
    let looked = 0;
    const { app, failures } = await appWith({
      maxFailures: 1,
      authenticate: async (token) => {
        looked += 1;
        if (token !== 'good') throw new Refused('unknown key');
        return 'agent_1';
      },
    });
    open = app;
    for (let attempt = 0; attempt < 5; attempt += 1) await app.inject({ url: '/', headers: { authorization: 'Bearer bad' } });
    const served = await app.inject({ url: '/', headers: { authorization: 'Bearer good' } });
    expect(served.statusCode).toBe(200);
    expect(served.json()).toEqual({ principal: 'agent_1' });
    expect(looked).toBe(6);
    // The accepted token is not a failure, and does not reset anyone's count.
    expect(failures).toHaveLength(5);
  });

  it("past the limit, a refused token is answered with the counter's error and Retry-After", async () => {
    const { app } = await appWith({ maxFailures: 1 });
    open = app;
    expect((await app.inject({ url: '/', headers: { authorization: 'Bearer bad' } })).statusCode).toBe(401);
    const limited = await app.inject({ url: '/', headers: { authorization: 'Bearer bad' } });
    expect(limited.statusCode).toBe(429);
    expect(limited.headers['retry-after']).toBe('42');
    expect(limited.json().message).toBe('too many failures');
  });
});
