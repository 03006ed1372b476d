import { CARD_WORDS, TONE_SYMBOLS, type CardTone } from '../chat/card-words.js';
import type { ProposalStatus } from '../core/model.js';
import { displaySafeJson } from '../config/display-text.js';
import { html, type HtmlValue, type SafeHtml } from './html.js';

/** What every signed-in page knows about the person looking at it. */
export interface Viewer {
  approver: string;
  csrfToken: string;
}

export type Section = 'pending' | 'history' | 'agents' | 'grants' | 'passkeys' | 'none';

export interface PageOptions {
  title: string;
  viewer: Viewer | null;
  section: Section;
  now: Date;
  /** Turns on live updates in console.js: the pending list, or one proposal's page. */
  live?: { kind: 'pending' } | { kind: 'proposal'; id: string };
  pendingCount?: number;
  notice?: SafeHtml | null;
  body: HtmlValue;
}

/** A state's name, as the approval card words it (src/chat/card-words.ts). */
export const statusLabel = (status: ProposalStatus): string => CARD_WORDS.states[status];

/** A state as a badge: the card's word for it (its `state`), a symbol, and a colour. */
export function statusBadge(tone: CardTone, label: string = CARD_WORDS.states[tone]): SafeHtml {
  return html`<span class="badge status-${tone}"><span aria-hidden="true">${TONE_SYMBOLS[tone]}</span> ${label}</span>`;
}

/** Times are shown in UTC, always with the zone, so two people comparing notes agree. */
export function formatTime(date: Date): string {
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

export function timeTag(date: Date): SafeHtml {
  const iso = date.toISOString();
  // Day and time each stay whole when a narrow column wraps them.
  return html`<time datetime="${iso}"><span class="nowrap">${iso.slice(0, 10)}</span> <span class="nowrap">${iso.slice(11, 19)} UTC</span></time>`;
}

export function formatRemaining(ms: number): string {
  if (ms <= 0) return 'expired';
  const seconds = Math.floor(ms / 1000);
  if (seconds < 60) return `${seconds} s left`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${seconds % 60} s left`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ${minutes % 60} min left`;
  return `${Math.floor(hours / 24)} days left`;
}

/** A grant's length as people say it: 15 min, 1 h, 2 d. */
export function formatDuration(ms: number): string {
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000} d`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  return `${Math.round(ms / 60_000)} min`;
}

/** A countdown that reads correctly without JavaScript and ticks with it (console.js). */
export function countdown(expiresAt: Date, now: Date): SafeHtml {
  const left = expiresAt.getTime() - now.getTime();
  return html`<span class="countdown${left < 60_000 ? ' soon' : ''}" data-expires="${expiresAt.toISOString()}"
    ><span class="sr-only">Expires: </span><span class="countdown-text">${formatRemaining(left)}</span></span
  >`;
}

/** Params and results as indented JSON, each string in them shown like a summary's values (⏎, `[U+202E]`, look-alike warnings). */
export function prettyJson(value: unknown): string {
  return JSON.stringify(displaySafeJson(value), null, 2) ?? 'null';
}

/** Every form carries the session's CSRF token and where to come back to. */
export function formFields(viewer: Viewer, returnTo?: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${viewer.csrfToken}" />${
    returnTo ? html`<input type="hidden" name="return" value="${returnTo}" />` : ''
  }`;
}

function navLink(href: string, label: HtmlValue, active: boolean): SafeHtml {
  return html`<a href="${href}"${active ? html` aria-current="page"` : ''}>${label}</a>`;
}

export function page(options: PageOptions): SafeHtml {
  const { viewer, section, live } = options;
  const count = options.pendingCount;
  return html`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <meta name="referrer" content="no-referrer" />
    <meta name="color-scheme" content="light dark" />
    <title>${options.title} · twokey</title>
    <link rel="icon" href="data:," />
    <link rel="stylesheet" href="/console/assets/console.css" />
    <script src="/console/assets/console.js" defer></script>
    <script src="/console/assets/webauthn.js" defer></script>
    <script src="/console/assets/passkeys.js" defer></script>
  </head>
  <body data-now="${options.now.toISOString()}" data-live="${live?.kind ?? ''}" data-proposal-id="${live?.kind === 'proposal' ? live.id : ''}">
    <a class="skip-link" href="#main">Skip to content</a>
    <header class="topbar">
      <div class="wrap topbar-inner">
        <a class="brand" href="/console"><span class="brand-mark" aria-hidden="true">2</span>twokey<span class="brand-sub">console</span></a>
        ${
          viewer
            ? html`<nav class="nav" aria-label="Console sections">
                ${navLink(
                  '/console',
                  html`Pending <span class="count" id="pending-count" aria-label="${count ?? 0} pending">${count ?? ''}</span>`,
                  section === 'pending',
                )}
                ${navLink('/console/history', 'History', section === 'history')}
                ${navLink('/console/agents', 'Agents', section === 'agents')}
                ${navLink('/console/grants', 'Grants', section === 'grants')}
                ${navLink('/console/passkeys', 'Passkeys', section === 'passkeys')}
              </nav>
              <div class="who">
                <span class="who-name"><span class="muted">Signed in as</span> <strong>${viewer.approver}</strong></span>
                <form method="post" action="/console/logout" class="inline">
                  ${formFields(viewer)}
                  <button type="submit" class="btn btn-quiet btn-small">Sign out</button>
                </form>
              </div>`
            : ''
        }
      </div>
    </header>
    <main id="main" class="wrap" tabindex="-1">
      <div id="live-status" class="sr-only" role="status" aria-live="polite"></div>
      ${options.notice ?? ''} ${options.body}
    </main>
    <footer class="wrap footer muted">twokey · times are UTC · no approval happens without a human</footer>
  </body>
</html>`;
}

export function notice(kind: 'ok' | 'error' | 'info', body: HtmlValue): SafeHtml {
  const role = kind === 'error' ? 'alert' : 'status';
  const symbol = kind === 'ok' ? '✓' : kind === 'error' ? '✕' : 'i';
  return html`<div class="notice notice-${kind}" role="${role}"><span class="notice-symbol" aria-hidden="true">${symbol}</span><div>${body}</div></div>`;
}
