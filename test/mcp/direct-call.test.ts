import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { directToolCall } from '../../src/mcp/direct-call.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { listen, readOnlyNotesConfig, startFakeUpstream, type FakeUpstream } from './support.js';

const UPSTREAM_TOKEN = 'upstream-token-0123456789abcdef';
const UPSTREAM_TIMEOUT_MS = 17_000;
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

const readNote = (id: number | string, args: unknown = { name: 'groceries' }, extra: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 'notes_read_note', arguments: args, ...extra },
});

/**
 * A tools/call of a tool no human decides is answered without the SDK's server and transport; a
 * batch of that same one call still goes through them. Both must answer the same JSON, status and
 * content type, and every request the direct path cannot take as it is must get the SDK's answer.
 */
describe.each(drivers)('MCP tools/call answered directly, as the SDK would (%s)', (driver) => {
  let upstream: FakeUpstream;
  let twokey: TestTwokey;
  let url: string;
  let apiKey: string;

  beforeAll(async () => {
    upstream = await startFakeUpstream({ token: UPSTREAM_TOKEN });
    twokey = await startTestTwokey({
      driver,
      // A timeout no other timer of the process uses: the test below picks the upstream call's deadline out by it.
      configYaml: readOnlyNotesConfig(upstream, UPSTREAM_TOKEN).replace('    tools:', `    timeout: ${UPSTREAM_TIMEOUT_MS / 1000}s\n    tools:`),
    });
    url = await listen(twokey);
    ({ apiKey } = await twokey.createAgent('direct'));
  }, 120_000);
  afterAll(async () => {
    await twokey?.close();
    await upstream?.close();
  });

  const post = async (body: unknown, headers: Record<string, string> = MCP_HEADERS, key = apiKey) => {
    const response = await fetch(url, { method: 'POST', headers: { ...headers, authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
    return { status: response.status, contentType: response.headers.get('content-type'), text: await response.text() };
  };
  /** The body with each proposal's id replaced: two calls make two proposals, the rest must match. */
  const withoutIds = (text: string) => text.replace(/prp_[\w-]{16}/g, 'prp_<id>');
  /** The SDK's answer to the same call sent as a batch of one (which it answers with that one response). */
  const throughSdk = (body: unknown, headers?: Record<string, string>, key?: string) => post([body], headers, key);

  it('sends its answer whole, with its length, not in chunks', async () => {
    const response = await fetch(url, { method: 'POST', headers: { ...MCP_HEADERS, authorization: `Bearer ${apiKey}` }, body: JSON.stringify(readNote(9)) });
    const text = await response.text();
    expect(response.status).toBe(200);
    expect(response.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
    expect(response.headers.get('transfer-encoding')).toBeNull();
  });

  it('makes no abort signal a call that nothing waits for would not use, and leaves no upstream deadline armed', async () => {
    await post(readNote(10));
    const any = vi.spyOn(AbortSignal, 'any');
    const timeout = vi.spyOn(AbortSignal, 'timeout');
    const deadlines: unknown[] = [];
    const armed = new Set<unknown>();
    vi.spyOn(globalThis, 'setTimeout').mockImplementation(((...args: Parameters<typeof setTimeout>) => {
      const timer = realSetTimeout(...args);
      if (args[1] === UPSTREAM_TIMEOUT_MS) {
        deadlines.push(timer);
        armed.add(timer);
      }
      return timer;
    }) as typeof setTimeout);
    vi.spyOn(globalThis, 'clearTimeout').mockImplementation(((timer: Parameters<typeof clearTimeout>[0]) => {
      armed.delete(timer);
      realClearTimeout(timer);
    }) as typeof clearTimeout);
    try {
      const answer = await post(readNote(11));
      expect(answer.text).toContain('"outcome":"committed"');
      // A rule answers the call at once: the signal a wait would watch (two joined by AbortSignal.any) is never made.
      expect(any).not.toHaveBeenCalled();
      // The upstream call's deadline is a timer of its own, cleared once the upstream answered:
      // AbortSignal.timeout's would stay armed for the whole timeout, one per call.
      expect(timeout).not.toHaveBeenCalled();
      expect(deadlines).toHaveLength(1);
      expect([...armed]).toEqual([]);
    } finally {
      vi.restoreAllMocks();
    }
  });

  it('answers a read-only call with the very JSON the SDK path answers, and records it like any proposal', async () => {
    const direct = await post(readNote(7));
    const sdk = await throughSdk(readNote(7));
    expect(direct.status).toBe(200);
    expect(direct.contentType).toBe('application/json');
    expect(withoutIds(direct.text)).toContain('(request prp_<id>)');
    expect({ ...direct, text: withoutIds(direct.text) }).toEqual({ ...sdk, text: withoutIds(sdk.text) });

    const answer = JSON.parse(direct.text) as { id: number; result: { structuredContent: { outcome: string; proposalId: string; result: unknown } } };
    expect(answer.id).toBe(7);
    expect(answer.result.structuredContent).toMatchObject({ outcome: 'committed', result: { content: [{ type: 'text', text: 'milk, eggs' }] } });
    const proposal = await twokey.services.store.getProposal(answer.result.structuredContent.proposalId);
    expect(proposal).toMatchObject({ status: 'committed', decidedBy: 'policy:upstream-readonly' });
    const audit = await twokey.services.store.listAudit({ proposalId: proposal!.id });
    expect(audit.map((event) => event.type)).toEqual(expect.arrayContaining(['proposal.created', 'proposal.committed']));
  });

  it('answers a string id, refused arguments and a secret in them as the SDK path does', async () => {
    for (const body of [readNote('call-1'), readNote(8, { name: 42 }), readNote(9, { name: 'tk_conf_0123456789abcdef' })]) {
      const direct = await post(body);
      const sdk = await throughSdk(body);
      expect({ ...direct, text: withoutIds(direct.text) }).toEqual({ ...sdk, text: withoutIds(sdk.text) });
    }
    expect(JSON.parse((await post(readNote(8, { name: 42 }))).text)).toMatchObject({ id: 8, result: { isError: true } });
  });

  it('answers a tool the agent may not see with the SDK’s InvalidParams error', async () => {
    const { apiKey: limitedKey } = await twokey.createAgent('limited', { operations: ['notes_delete_note'] });
    const direct = await post(readNote(3), MCP_HEADERS, limitedKey);
    const sdk = await throughSdk(readNote(3), MCP_HEADERS, limitedKey);
    expect(direct).toEqual(sdk);
    expect(JSON.parse(direct.text)).toEqual({ jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'MCP error -32602: unknown tool "notes_read_note"' } });
  });

  it('counts a direct call as the SDK path counts it, and times it under its route', async () => {
    const metric = async (series: string) => {
      const text = (await twokey.app.inject({ method: 'GET', url: '/metrics' })).body;
      const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
      return line ? Number(line.split(' ')[1]) : 0;
    };
    const committed = 'twokey_mcp_tool_calls_total{tool="notes_read_note",outcome="committed"}';
    const refused = 'twokey_mcp_tool_calls_total{tool="notes_read_note",outcome="refused"}';
    const timed = 'twokey_http_request_duration_seconds_count{route="/mcp",method="POST",status="200"}';
    const before = { committed: await metric(committed), refused: await metric(refused), timed: await metric(timed) };
    await post(readNote(11));
    await throughSdk(readNote(12));
    await post(readNote(13, { name: 42 }));
    expect({ committed: await metric(committed), refused: await metric(refused), timed: await metric(timed) }).toEqual({
      committed: before.committed + 2,
      refused: before.refused + 1,
      timed: before.timed + 3,
    });
  });

  it('leaves a request it cannot take as it is to the SDK: wrong Accept, content type, protocol version, shape', async () => {
    const calls = upstream.calls.length;
    const notAcceptable = await post(readNote(1), { ...MCP_HEADERS, accept: 'application/json' });
    expect(notAcceptable.status).toBe(406);
    expect(JSON.parse(notAcceptable.text)).toMatchObject({ error: { code: -32000, message: expect.stringMatching(/^Not Acceptable/) }, id: null });

    const wrongType = await fetch(url, {
      method: 'POST',
      headers: { ...MCP_HEADERS, 'content-type': 'text/plain', authorization: `Bearer ${apiKey}` },
      body: JSON.stringify(readNote(1)),
    });
    expect(wrongType.status).toBe(415);
    expect(await wrongType.json()).toMatchObject({ error: { code: -32000, message: expect.stringMatching(/^Unsupported Media Type/) } });

    const oldVersion = await post(readNote(1), { ...MCP_HEADERS, 'mcp-protocol-version': '1999-01-01' });
    expect(oldVersion.status).toBe(400);
    expect(JSON.parse(oldVersion.text)).toMatchObject({ error: { code: -32000, message: expect.stringMatching(/Unsupported protocol version: 1999-01-01/) } });

    const extraKey = await post({ ...readNote(1), extra: true });
    expect(extraKey.status).toBe(400);
    expect(JSON.parse(extraKey.text)).toMatchObject({ error: { code: -32700, message: 'Parse error: Invalid JSON-RPC message' } });

    const fractionalId = await post(readNote(1.5));
    expect(fractionalId.status).toBe(400);
    expect(upstream.calls.length).toBe(calls);
  });

  it('accepts a supported protocol version header', async () => {
    const answer = await post(readNote(2), { ...MCP_HEADERS, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toMatchObject({ id: 2, result: { structuredContent: { outcome: 'committed' } } });
  });
});

describe('which requests the direct path takes', () => {
  const headers = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };

  it('takes a well-formed single tools/call with the headers the spec requires', () => {
    expect(directToolCall(headers, readNote(1))).toEqual({ id: 1, name: 'notes_read_note', args: { name: 'groceries' } });
    const { arguments: _none, ...withoutArguments } = readNote('a').params;
    expect(directToolCall({ ...headers, 'content-type': 'application/json; charset=utf-8' }, { ...readNote('a'), params: withoutArguments })).toEqual({
      id: 'a',
      name: 'notes_read_note',
      args: undefined,
    });
    expect(directToolCall(headers, readNote(1, {}, { _meta: { 'io.twokey/trace': 'x' } }))).not.toBeNull();
  });

  it('leaves everything else to the SDK', () => {
    const refused: Array<[Record<string, string>, unknown]> = [
      [{ ...headers, accept: 'application/json' }, readNote(1)],
      [{ ...headers, accept: 'text/event-stream' }, readNote(1)],
      [{ ...headers, 'content-type': 'text/plain' }, readNote(1)],
      [{ ...headers, 'mcp-protocol-version': '1999-01-01' }, readNote(1)],
      [headers, [readNote(1)]],
      [headers, { ...readNote(1), extra: 1 }],
      [headers, { ...readNote(1), jsonrpc: '1.0' }],
      [headers, readNote(1.5)],
      [headers, readNote(null as unknown as number)],
      [headers, readNote(1, ['groceries'])],
      [headers, readNote(1, {}, { _meta: { progressToken: 'p' } })],
      [headers, readNote(1, {}, { _meta: { 'io.modelcontextprotocol/related-task': { taskId: 't' } } })],
      [headers, readNote(1, {}, { task: { ttl: 1000 } })],
      [headers, { jsonrpc: '2.0', id: 1, method: 'tools/list' }],
      [headers, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { arguments: {} } }],
    ];
    for (const [requestHeaders, body] of refused) expect(directToolCall(requestHeaders, body), JSON.stringify([requestHeaders, body])).toBeNull();
  });
});
