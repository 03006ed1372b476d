import type * as Undici from 'undici';
import { loadUndici } from './lazy-undici.js';

/**
 * A `fetch` for SDK clients that take one as an option (Slack's Web API client), sent with undici's
 * `request`. Node's global fetch wraps every call in a Request, web streams and an abort controller
 * of its own: measured on this project's 2-core VM against a local server (3,000 small form POSTs,
 * warm, the server in the same process), 0.4 to 0.5 ms of CPU a call through fetch and 0.13 through
 * this. A proposal's life in Slack is three or four Web API calls.
 *
 * It covers what such clients send: a string or URL, a method, headers, a string or byte body, an
 * abort signal. Anything else (a Request object, a FormData or stream body: Slack's file uploads) goes
 * to the global fetch unchanged. Redirects are refused as `redirect: 'error'` refuses them (undici's
 * `request` follows none, and twokey never asks for one to be followed).
 *
 * The answer is the body read whole, behind what clients read of a Response (status, headers, text,
 * json, bytes): building a real Response and Headers cost as much again as the request itself. What
 * it does not cover itself (the body as a stream, blob, formData, clone) comes from a real Response
 * built on first use.
 */
export async function undiciFetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
  const body = init.body;
  const plainBody = body === undefined || body === null || typeof body === 'string' || body instanceof Uint8Array;
  if (!(typeof input === 'string' || input instanceof URL) || !plainBody || init.redirect === 'follow') {
    return globalThis.fetch(input, init);
  }
  const { request } = await loadUndici();
  const answer = await request(input, {
    method: (init.method ?? 'GET') as Undici.Dispatcher.HttpMethod,
    headers: headerRecord(init.headers),
    body: body ?? null,
    signal: init.signal ?? undefined,
  });
  if (REDIRECT_STATUSES.has(answer.statusCode)) {
    await answer.body.dump();
    // What fetch throws for a redirect under `redirect: 'error'` (and 'manual' is not asked for here).
    throw new TypeError('fetch failed', { cause: new Error(`unexpected redirect (HTTP ${answer.statusCode})`) });
  }
  const bytes = new Uint8Array(await answer.body.arrayBuffer());
  return new BufferedResponse(
    answer.statusCode,
    answer.headers,
    NULL_BODY_STATUSES.has(answer.statusCode) ? null : bytes,
    String(input),
  ) as unknown as Response;
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** The statuses a Response may not be built with a body for. */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

function headerRecord(headers: RequestInit['headers']): Record<string, string> {
  if (!headers) return {};
  if (headers instanceof Headers || Array.isArray(headers)) return Object.fromEntries(headers);
  return headers as Record<string, string>;
}

type RawHeaders = Record<string, string | string[] | undefined>;

/** Read-only headers over undici's record (names already lower-case), as a Headers reads them. */
class RecordHeaders {
  constructor(private readonly raw: RawHeaders) {}
  get(name: string): string | null {
    const value = this.raw[name.toLowerCase()];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(', ') : value;
  }
  has(name: string): boolean {
    return this.raw[name.toLowerCase()] !== undefined;
  }
  getSetCookie(): string[] {
    const value = this.raw['set-cookie'];
    return value === undefined ? [] : Array.isArray(value) ? value : [value];
  }
  *entries(): IterableIterator<[string, string]> {
    for (const name of Object.keys(this.raw).sort()) {
      const value = this.get(name);
      if (value !== null) yield [name, value];
    }
  }
  *keys(): IterableIterator<string> {
    for (const [name] of this.entries()) yield name;
  }
  *values(): IterableIterator<string> {
    for (const [, value] of this.entries()) yield value;
  }
  forEach(each: (value: string, name: string, headers: this) => void): void {
    for (const [name, value] of this.entries()) each(value, name, this);
  }
  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }
  toHeaders(): Headers {
    const headers = new Headers();
    for (const [name, value] of Object.entries(this.raw)) {
      if (Array.isArray(value)) for (const each of value) headers.append(name, each);
      else if (value !== undefined) headers.append(name, value);
    }
    return headers;
  }
}

class BufferedResponse {
  readonly headers: RecordHeaders;
  readonly statusText = '';
  readonly redirected = false;
  readonly type = 'basic';
  private bodyRead = false;
  private real: Response | null = null;

  constructor(
    readonly status: number,
    raw: RawHeaders,
    private readonly content: Uint8Array | null,
    readonly url: string,
  ) {
    this.headers = new RecordHeaders(raw);
  }

  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }
  get bodyUsed(): boolean {
    return this.bodyRead || (this.real?.bodyUsed ?? false);
  }
  get body(): ReadableStream<Uint8Array> | null {
    return this.asResponse().body;
  }

  /** The body, once, as a Response gives it once. */
  private readOnce(): Uint8Array {
    if (this.bodyUsed) throw new TypeError('Body is unusable: Body has already been read');
    this.bodyRead = true;
    return this.content ?? new Uint8Array(0);
  }
  async bytes(): Promise<Uint8Array> {
    return this.readOnce();
  }
  async arrayBuffer(): Promise<ArrayBuffer> {
    const bytes = this.readOnce();
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  }
  async text(): Promise<string> {
    return new TextDecoder().decode(this.readOnce());
  }
  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }
  blob(): Promise<Blob> {
    return this.asResponse().blob();
  }
  formData(): Promise<FormData> {
    return this.asResponse().formData();
  }
  clone(): Response {
    return this.asResponse().clone();
  }

  private asResponse(): Response {
    this.real ??= new Response(this.bodyRead ? null : this.content, { status: this.status, headers: this.headers.toHeaders() });
    return this.real;
  }
}
