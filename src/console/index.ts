import type { FastifyInstance } from 'fastify';
import type { ConsoleSignInConfig } from '../config/console-config.js';
import type { Env } from '../config/env.js';
import { chatPlatformLabels } from '../platforms/index.js';
import { formatTime } from './layout.js';
import { registerConsoleRoutes } from './plugin.js';
import { createOidcSignIn } from './oidc.js';
import type { ConsoleServices, ConsoleStores } from './ports.js';
import { createConsoleAuth } from './sign-in.js';
import { consoleUrl, publicBaseUrl, servedOverHttps, signInUrl } from './urls.js';

export { CONTENT_SECURITY_POLICY } from './security.js';
export { LINK_TTL_MS, SESSION_TTL_MS, webIdentity } from './sign-in.js';
export { consoleUrl, publicBaseUrl, signInUrl } from './urls.js';

export interface WebConsoleOptions {
  env: Pick<Env, 'TWOKEY_PUBLIC_URL' | 'HOST' | 'PORT'>;
  /** The core's services the console calls. */
  services: ConsoleServices;
  /** Its own storage (sign-in links, sessions, the history's queries). */
  stores: ConsoleStores;
  /** `console:` of the config file: an OpenID Connect issuer people may sign in with. */
  signIn?: ConsoleSignInConfig;
  /** The address the gateway listens on, once it does (the base of links when TWOKEY_PUBLIC_URL is unset). */
  listenUrl?: () => string | null;
}

/** The web console (docs/console.md): pages under /console, sign-in links, sessions. */
export function createWebConsole({ env, services, stores, signIn, listenUrl }: WebConsoleOptions) {
  const auth = createConsoleAuth({ sessions: stores.sessions, clock: services.clock });
  const queries = stores.queries;
  const oidc = signIn?.oidc
    ? createOidcSignIn({
        config: signIn.oidc,
        clock: services.clock,
        redirectUri: () => new URL('/console/auth/callback', publicBaseUrl(env, listenUrl?.())).toString(),
      })
    : null;

  return {
    auth,
    /** Adds /console/… to the gateway. Call before the app listens. */
    registerRoutes(app: FastifyInstance): Promise<void> {
      return registerConsoleRoutes(app, {
        services,
        auth,
        oidc,
        queries,
        secureCookies: servedOverHttps(env),
        publicOrigin: env.TWOKEY_PUBLIC_URL ? new URL(env.TWOKEY_PUBLIC_URL).origin : null,
      });
    },
    /**
     * The first minute of a new user: with no Slack or Discord configured, the runtime prints this at
     * start. It mints a sign-in link for `web:operator` and returns the text to print. Print it to a
     * terminal only, never through the logger or into a collected stream.
     */
    async firstRunSignIn(listenUrl?: string | null): Promise<string> {
      const base = publicBaseUrl(env, listenUrl);
      if (oidc) {
        // People sign in with the issuer; no link is minted that nobody asked for.
        return ['', `twokey web console: ${consoleUrl(base)}`, `Sign in with ${oidc.name} there. Break-glass: npx twokey approvers link NAME`, ''].join('\n');
      }
      let link: Awaited<ReturnType<typeof auth.mintLink>>;
      try {
        link = await auth.mintLink('operator', 'system');
      } catch {
        // A start on a disk short of space (writes refused) must still start: reads and /readyz work.
        return [
          '',
          `twokey web console: ${consoleUrl(base)}`,
          'No sign-in link yet: the database does not take writes now (see the log).',
          'Once it does: npx twokey approvers link operator',
          '',
        ].join('\n');
      }
      const { approver, token, expiresAt } = link;
      const decides = services.operations().some((operation) => operation.approval.approvers.includes(approver));
      return [
        '',
        `twokey web console: ${consoleUrl(base)}`,
        `No ${chatPlatformLabels} is configured: approve proposals in the browser.`,
        `Sign in as ${approver} with this link (it works once, until ${formatTime(expiresAt)}):`,
        '',
        `  ${signInUrl(base, token)}`,
        '',
        decides
          ? 'Need another link later? npx twokey approvers link operator'
          : `Note: ${approver} approves no operation in this config; add it to an operation's approval.approvers to decide there.`,
        '',
      ].join('\n');
    },
  };
}

export type WebConsole = ReturnType<typeof createWebConsole>;
