import type { ConsoleGuard } from './guard.js';
import type { OidcSignIn } from './oidc.js';
import type { ConsoleQueries, ConsoleServices } from './ports.js';
import type { ProposalItems } from './proposal-items.js';
import type { SendPage } from './respond.js';
import type { ConsoleAuth } from './sign-in.js';

/** What every console plugin is registered with (its fastify options). */
export interface ConsoleContext {
  services: ConsoleServices;
  auth: ConsoleAuth;
  /** Sign-in through an OpenID Connect issuer, when the config names one. */
  oidc: OidcSignIn | null;
  queries: ConsoleQueries;
  guard: ConsoleGuard;
  items: ProposalItems;
  send: SendPage;
  cookieName: string;
  /** Cookies get `Secure` when people reach twokey over https (TWOKEY_PUBLIC_URL). */
  secureCookies: boolean;
  /** The origin people use (TWOKEY_PUBLIC_URL): the passkeys' relying party; else the request's own origin. */
  publicOrigin: string | null;
  /** Open event streams; each ends when the server closes, or fastify would wait on them forever. */
  streams: Set<() => void>;
}
