import type { Env } from '../config/env.js';

/**
 * Where people reach twokey: TWOKEY_PUBLIC_URL when set, else the listen address. A wildcard
 * listen address is no place a browser can go, so it becomes localhost.
 */
export function publicBaseUrl(env: Pick<Env, 'TWOKEY_PUBLIC_URL' | 'HOST' | 'PORT'>, listenUrl?: string | null): string {
  if (env.TWOKEY_PUBLIC_URL) return new URL(env.TWOKEY_PUBLIC_URL).origin;
  if (listenUrl) {
    const url = new URL(listenUrl);
    if (url.hostname === '0.0.0.0' || url.hostname === '[::]') url.hostname = 'localhost';
    return url.origin;
  }
  const wildcard = env.HOST === '0.0.0.0' || env.HOST === '::' || env.HOST === '';
  const host = wildcard ? 'localhost' : env.HOST.includes(':') ? `[${env.HOST}]` : env.HOST;
  return `http://${host}:${env.PORT}`;
}

/** Cookies get `Secure` exactly when people reach twokey over https. */
export const servedOverHttps = (env: Pick<Env, 'TWOKEY_PUBLIC_URL'>): boolean =>
  env.TWOKEY_PUBLIC_URL !== undefined && new URL(env.TWOKEY_PUBLIC_URL).protocol === 'https:';

export const consoleUrl = (base: string): string => new URL('/console', base).toString();

export function signInUrl(base: string, token: string): string {
  const url = new URL('/console/login', base);
  url.searchParams.set('token', token);
  return url.toString();
}
