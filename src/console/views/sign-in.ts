import { html, type HtmlValue, type SafeHtml } from '../html.js';
import { formatTime, notice, type Viewer } from '../layout.js';
import type { OidcProblem } from '../oidc.js';
import type { LinkProblem } from '../sign-in.js';

const LINK_PROBLEMS: Record<LinkProblem | 'cross-site', string> = {
  'cross-site': 'This sign-in was sent from another site and was refused. Open the link itself in your browser.',
  malformed: 'This sign-in link is not valid. Check that you copied all of it.',
  unknown: 'This sign-in link is not valid. Check that you copied all of it, or ask for a new one.',
  used: 'This sign-in link was already used. Each link works only once: ask for a new one.',
  expired: 'This sign-in link has expired (links work for 10 minutes). Ask for a new one.',
};

function signInCard(body: HtmlValue): SafeHtml {
  return html`<section class="card signin" aria-labelledby="signin-title">${body}</section>`;
}

const howToGetALink = html`<p>An operator prints a one-time link with:</p>
  <pre><code>twokey approvers link YOUR_NAME</code></pre>
  <p class="muted small">You then act as the approver <code>web:YOUR_NAME</code>. Links work once, for 10 minutes.</p>`;

const OIDC_PROBLEMS: Record<OidcProblem | 'not-configured', string> = {
  'not-configured': 'This console has no sign-in through an identity provider. Use a one-time link.',
  'no-flow': 'This sign-in did not start here, or your browser did not keep its cookie. Start again from the sign-in page.',
  'flow-expired': 'This sign-in took longer than 10 minutes. Start again from the sign-in page.',
  'refused-by-issuer': 'The identity provider did not sign you in.',
  'not-verified': 'The answer of the identity provider could not be verified, so it was not trusted. Start again from the sign-in page.',
  'no-identity': 'The identity provider did not say who you are in the claim twokey is configured to read.',
  'unverified-email': 'The identity provider says your email address is not verified, so it cannot name you here.',
  'issuer-unreachable': 'twokey cannot reach the identity provider right now. Try again in a minute, or use a one-time link.',
};

/** The sign-in page: the issuer's button when one is configured, and how to get a one-time link. */
export function signInPrompt(viewer: Viewer | null, issuerName: string | null = null): SafeHtml {
  return signInCard(html`<h1 id="signin-title">Sign in to the twokey console</h1>
    ${viewer ? html`<p>You are signed in as <strong>${viewer.approver}</strong>. <a href="/console">Go to the pending proposals</a>.</p>` : ''}
    ${issuerName ? html`<p><a class="btn btn-primary btn-large" href="/console/login?with=oidc">Sign in with ${issuerName}</a></p><p class="muted small">Or, for set-up and break-glass:</p>` : ''}
    ${howToGetALink}`);
}

export function oidcRefused(issuerName: string | null, problem: OidcProblem | 'not-configured', detail?: string): SafeHtml {
  return signInCard(html`<h1 id="signin-title">${issuerName ? html`Sign-in with ${issuerName} refused` : 'Sign-in refused'}</h1>
    ${notice('error', html`${OIDC_PROBLEMS[problem]}${detail ? html` <span class="muted">(${detail})</span>` : ''}`)}
    ${issuerName ? html`<p><a class="btn btn-primary" href="/console/login?with=oidc">Sign in with ${issuerName} again</a></p>` : ''}
    ${howToGetALink}`);
}

/** After the issuer's callback: the session cookie is set; the link is a same-site navigation that carries it. */
export function oidcSignedIn(approver: string): SafeHtml {
  return signInCard(html`<h1 id="signin-title">You are signed in</h1>
    <p>You act as the approver <strong>${approver}</strong>.</p>
    <p><a class="btn btn-primary btn-large" href="/console?done=signed-in" autofocus>Continue to the console</a></p>`);
}

export function signInConfirm(token: string, approver: string, expiresAt: Date): SafeHtml {
  return signInCard(html`<h1 id="signin-title">Sign in to the twokey console</h1>
    <p>This link signs you in as the approver <strong>${approver}</strong>.</p>
    <form method="post" action="/console/login">
      <input type="hidden" name="token" value="${token}" />
      <button type="submit" class="btn btn-primary btn-large">Sign in as ${approver}</button>
    </form>
    <p class="muted small">The link works once and expires at ${formatTime(expiresAt)}. Signing in opens a session of 12 hours on this browser.</p>`);
}

export function signInRefused(problem: LinkProblem | 'cross-site'): SafeHtml {
  return signInCard(html`<h1 id="signin-title">This link cannot sign you in</h1>
    ${notice('error', LINK_PROBLEMS[problem])}
    ${howToGetALink}`);
}

export function signedOutPage(): SafeHtml {
  return signInCard(html`<h1 id="signin-title">You are signed out</h1>
    <p>Your session has ended on this browser.</p>
    ${howToGetALink}`);
}
