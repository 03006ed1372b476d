import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { listen, startFakeUpstream, type FakeUpstream } from '../mcp/support.js';

const UPSTREAM_TOKEN = 'upstream-token-0123456789abcdef';

const configFor = (upstreamUrl: string) => `
operations: []
upstreams:
  - name: notes
    url: ${upstreamUrl}
    headers: { authorization: "Bearer ${UPSTREAM_TOKEN}" }
    timeout: 10s
    approval:
      approvers: [web:alice]
    tools:
      read_note: { readOnly: true }
`;

const TRACE_ID = '9'.repeat(32);
const AGENT_SPAN_ID = '8'.repeat(16);

describe.each(drivers)('OpenTelemetry through MCP: the agent request and the upstream call (%s)', (driver) => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  let upstream: FakeUpstream;
  let twokey: TestTwokey;
  let client: Client;

  beforeAll(async () => {
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    upstream = await startFakeUpstream({ token: UPSTREAM_TOKEN });
    twokey = await startTestTwokey({ driver, configYaml: configFor(upstream.url), env: { TWOKEY_MCP_WAIT: '50', NOTES_TOKEN: UPSTREAM_TOKEN } });
    const url = await listen(twokey);
    const { apiKey } = await twokey.createAgent('argus');
    client = new Client({ name: 'traced-agent', version: '1.0.0' }, { capabilities: {} });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { authorization: `Bearer ${apiKey}`, traceparent: `00-${TRACE_ID}-${AGENT_SPAN_ID}-01` } },
      }),
    );
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    await twokey?.close();
    await upstream?.close();
    trace.disable();
    context.disable();
    propagation.disable();
    await provider.shutdown();
  });

  it("a tools/call joins the agent's trace, and the upstream receives it in its headers and in _meta", async () => {
    const before = upstream.headers.length;
    const result = (await client.callTool({ name: 'notes_read_note', arguments: { name: 'groceries' } })) as CallToolResult;
    const proposalId = (result.structuredContent as { proposalId: string; outcome: string }).proposalId;
    expect(result.structuredContent).toMatchObject({ outcome: 'committed' });

    const spans = exporter.getFinishedSpans().filter((span) => span.spanContext().traceId === TRACE_ID);
    const only = (name: string): ReadableSpan => {
      const found = spans.filter((span) => span.name === name && span.attributes['twokey.proposal.id'] === proposalId);
      expect(found, name).toHaveLength(1);
      return found[0] as ReadableSpan;
    };
    const propose = only('twokey.propose');
    expect(propose.parentSpanContext?.spanId).toBe(AGENT_SPAN_ID);
    expect(only('twokey.wait_for_approval').attributes).toMatchObject({ 'twokey.decided_by': 'policy' });
    const execute = only('twokey.execute');
    expect(execute.attributes).toMatchObject({ 'twokey.operation': 'notes_read_note' });

    const call = upstream.calls.at(-1);
    expect(call?.meta?.traceparent).toBe(`00-${TRACE_ID}-${execute.spanContext().spanId}-01`);
    const sent = upstream.headers.slice(before).map((headers) => headers.traceparent);
    expect(sent).toContain(`00-${TRACE_ID}-${execute.spanContext().spanId}-01`);
  });
});
