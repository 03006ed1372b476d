import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../core/model.js';
import { html, type HtmlValue, type SafeHtml } from './html.js';
import { notice, page, type Section, type Viewer } from './layout.js';
import type { ConsoleSession } from './sign-in.js';

export interface PageReply {
  title: string;
  viewer: Viewer | null;
  section: Section;
  body: HtmlValue;
  live?: { kind: 'pending' } | { kind: 'proposal'; id: string };
  pendingCount?: number;
  notice?: SafeHtml | null;
}

export type SendPage = (reply: FastifyReply, status: number, options: PageReply) => FastifyReply;

/** Every HTML answer of the console: the layout around a body, stamped with the clock's time. */
export function pageSender(clock: Clock): SendPage {
  return (reply, status, options) =>
    reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(page({ ...options, now: clock() }).value);
}

/** Every refusal reads the same way: what was refused, why, nothing changed, and the way back. */
export function refusal(viewer: Viewer | null, what: { heading: string; message: HtmlValue; back: string; title?: string }): PageReply {
  return { title: what.title ?? 'Not done', viewer, section: 'none', body: refusedPage(what.heading, what.message, what.back) };
}

export const viewerOf = (session: ConsoleSession): Viewer => ({ approver: session.approver, csrfToken: session.csrfToken });

/** A form value: one string, never an array (a repeated field is refused as missing). */
export function field(body: unknown, name: string): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

export function queryField(request: FastifyRequest, name: string): string {
  const value = (request.query as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? value.trim() : '';
}

const CONSOLE_ORIGIN = 'http://console.invalid';
// Refused before resolution: anything a browser or a proxy could read differently from the URL
// parser (backslashes, encoded dots and slashes, controls and spaces, `//` anywhere).
const AMBIGUOUS_PATH = /[\\\s\p{Cc}]|%(?:2e|2f|5c)|\/\//iu;

/**
 * Only paths inside the console, so a forged `return` cannot turn twokey into an open redirect. It is
 * checked as the browser will read it: resolved against the console's origin (WHATWG URL, so
 * `/console/../../evil` is `/evil`), then the resolved path must be `/console` or under `/console/`.
 * Returns the resolved path and query, never the text as given.
 */
export function safeReturn(value: string | undefined): string {
  if (!value?.startsWith('/') || AMBIGUOUS_PATH.test(value)) return '/console';
  let url: URL;
  try {
    url = new URL(value, CONSOLE_ORIGIN);
  } catch {
    return '/console';
  }
  const insideConsole = url.pathname === '/console' || url.pathname.startsWith('/console/');
  if (url.origin !== CONSOLE_ORIGIN || !insideConsole || url.pathname.includes('//')) return '/console';
  return url.pathname + url.search;
}

export function withParams(path: string, params: Record<string, string>): string {
  const url = new URL(path, CONSOLE_ORIGIN);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  return url.pathname + url.search;
}

/** A refused action (HTTP 4xx): what happened, and a way back. */
function refusedPage(title: string, message: HtmlValue, back: string): SafeHtml {
  return html`<div class="page-head"><h1>${title}</h1></div>
    ${notice('error', message)}
    <p><a class="btn btn-quiet" href="${back}">← Back</a></p>`;
}
