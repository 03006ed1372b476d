import { html, type HtmlValue, type SafeHtml } from '../html.js';
import { formatTime, notice, type Viewer } from '../layout.js';
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

export function signInPrompt(viewer: Viewer | null): SafeHtml {
  return signInCard(html`<h1 id="signin-title">Sign in to the twokey console</h1>
    ${viewer ? html`<p>You are signed in as <strong>${viewer.approver}</strong>. <a href="/console">Go to the pending proposals</a>.</p>` : ''}
    ${howToGetALink}`);
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
