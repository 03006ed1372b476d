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
        check: () => {
          if (failures.length >= (options.maxFailures ?? Infinity)) throw Object.assign(new Error('too many failures'), { statusCode: 429 });
        },
        recordFailure: (request) => failures.push(request.ip),
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

  it('refuses a caller past its failure limit before looking at the token', async () => {
    let looked = 0;
    const { app } = await appWith({
      maxFailures: 1,
      authenticate: async (token) => {
        looked += 1;
        if (token !== 'good') throw new Refused('unknown key');
        return 'agent_1';
      },
    });
    open = app;
    expect((await app.inject({ url: '/', headers: { authorization: 'Bearer bad' } })).statusCode).toBe(401);
    const blocked = await app.inject({ url: '/', headers: { authorization: 'Bearer good' } });
    expect(blocked.statusCode).toBe(429);
    expect(looked).toBe(1);
  });
});
