import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { ConsoleContext } from '../context.js';
import { OIDC_FLOW_TTL_MS } from '../oidc.js';
import { SESSION_TTL_MS } from '../sign-in.js';
import { oidcRefused, oidcSignedIn } from '../views/sign-in.js';

const flowCookieOf = (secureCookies: boolean) => ({
  name: secureCookies ? '__Secure-twokey_oidc' : 'twokey_oidc',
  // Lax, not Strict: the issuer's redirect back is a cross-site navigation, and the flow cookie must ride on it.
  options: { path: '/console/auth', httpOnly: true, sameSite: 'lax', secure: secureCookies } as const,
});

/** `/console/login?with=oidc`: sends the browser to the issuer, with the flow's checks in a cookie. */
export async function startOidcSignIn({ oidc, send, secureCookies }: ConsoleContext, reply: FastifyReply): Promise<FastifyReply> {
  if (!oidc) return send(reply, 404, { title: 'Not found', viewer: null, section: 'none', body: oidcRefused(null, 'not-configured') });
  let started: Awaited<ReturnType<typeof oidc.start>>;
  try {
    started = await oidc.start();
  } catch (error) {
    reply.log.warn({ err: error, issuer: oidc.issuer }, 'console sign-in: the OpenID Connect issuer could not be reached');
    return send(reply, 503, { title: 'Sign-in unavailable', viewer: null, section: 'none', body: oidcRefused(oidc.name, 'issuer-unreachable') });
  }
  const flowCookie = flowCookieOf(secureCookies);
  reply.setCookie(flowCookie.name, started.flow, { ...flowCookie.options, maxAge: Math.floor(OIDC_FLOW_TTL_MS / 1000) });
  return reply.redirect(started.url, 303);
}

/** `/console/auth/callback`: checks what the issuer sent back and opens a console session. */
export const oidcSignInRoutes: FastifyPluginAsync<ConsoleContext> = async (scope, { oidc, auth, guard, send, cookieName, secureCookies }) => {
  if (!oidc) return;
  const { name: flowCookie, options: flowCookieOptions } = flowCookieOf(secureCookies);

  scope.get('/auth/callback', async (request, reply) => {
    // Spent whatever happens: a callback is answered once, and a second try starts a new flow.
    reply.clearCookie(flowCookie, flowCookieOptions);
    const callbackUrl = new URL(request.url, 'http://callback.invalid');
    const result = await oidc.finish(callbackUrl, request.cookies[flowCookie]);
    if (!result.ok) {
      request.log.warn({ problem: result.problem, detail: result.detail, issuer: oidc.issuer }, 'console sign-in refused');
      return send(reply, 403, { title: 'Sign-in refused', viewer: null, section: 'none', body: oidcRefused(oidc.name, result.problem, result.detail) });
    }
    const previous = await guard.sessionOf(request);
    if (previous) await auth.signOut(previous);
    const { secret, session } = await auth.signInVerified(result.identity, result.groups, oidc.issuer);
    reply.setCookie(cookieName, secret, {
      path: '/console',
      httpOnly: true,
      sameSite: 'strict',
      secure: secureCookies,
      maxAge: Math.floor(SESSION_TTL_MS / 1000),
    });
    request.log.info({ approver: session.approver, via: 'oidc' }, 'console sign-in');
    // A page, not a redirect: this request came from the issuer's site, so a browser would leave the
    // Strict session cookie off a redirect that follows it. The link below is a same-site navigation.
    return send(reply, 200, { title: 'Signed in', viewer: null, section: 'none', body: oidcSignedIn(session.approver) });
  });
};
