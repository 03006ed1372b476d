import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { ConsoleContext } from '../context.js';
import { field, queryField, viewerOf } from '../respond.js';
import { sessionForm, signInForm } from '../schemas.js';
import { SESSION_TTL_MS } from '../sign-in.js';
import { startOidcSignIn } from './oidc-sign-in.js';
import { signedOutPage, signInConfirm, signInPrompt, signInRefused } from '../views/sign-in.js';

/** Sign-in with a one-time link (or, with `?with=oidc`, through the issuer), and sign-out. */
export const signInRoutes: FastifyPluginAsync<ConsoleContext> = async (scope, context) => {
  const { auth, guard, send, cookieName, secureCookies, oidc } = context;
  const routes = scope.withTypeProvider<ZodTypeProvider>();

  routes.get('/login', async (request, reply) => {
    if (queryField(request, 'with') === 'oidc') return startOidcSignIn(context, reply);
    const token = queryField(request, 'token');
    const session = await guard.sessionOf(request);
    const viewer = session ? viewerOf(session) : null;
    if (!token) return send(reply, 200, { title: 'Sign in', viewer, section: 'none', body: signInPrompt(viewer, oidc?.name ?? null) });
    // Showing the page does not spend the link: chat and mail previews fetch links by themselves.
    const check = await auth.inspectLink(token);
    if (!check.ok) return send(reply, 403, { title: 'Sign-in refused', viewer, section: 'none', body: signInRefused(check.problem) });
    return send(reply, 200, { title: 'Sign in', viewer, section: 'none', body: signInConfirm(token, check.approver, check.expiresAt) });
  });

  // No rate limit: a link holds 256 random bits, so guessing is hopeless, and a team behind one
  // address must be able to sign in together.
  routes.post('/login', { schema: { body: signInForm } }, async (request, reply) => {
    if (guard.crossSite(request)) {
      return send(reply, 403, { title: 'Sign-in refused', viewer: null, section: 'none', body: signInRefused('cross-site') });
    }
    const result = await auth.signIn(field(request.body, 'token') ?? '');
    if (!result.ok) return send(reply, 403, { title: 'Sign-in refused', viewer: null, section: 'none', body: signInRefused(result.problem) });
    // Signing in again (as the same person or another) ends the session this browser had.
    const previous = await guard.sessionOf(request);
    if (previous) await auth.signOut(previous);
    reply.setCookie(cookieName, result.secret, {
      path: '/console',
      httpOnly: true,
      sameSite: 'strict',
      secure: secureCookies,
      maxAge: Math.floor(SESSION_TTL_MS / 1000),
    });
    request.log.info({ approver: result.session.approver }, 'console sign-in');
    // A redirect, so the link's token leaves the address bar and the history.
    return reply.redirect('/console?done=signed-in', 303);
  });

  routes.post('/logout', { schema: { body: sessionForm }, preHandler: guard.form }, async (request, reply) => {
    await auth.signOut(guard.session(request));
    reply.clearCookie(cookieName, { path: '/console', httpOnly: true, sameSite: 'strict', secure: secureCookies });
    return send(reply, 200, { title: 'Signed out', viewer: null, section: 'none', body: signedOutPage() });
  });
};
