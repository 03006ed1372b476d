import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { once } from 'node:events';
import { context, propagation, trace, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator, hrTimeToMilliseconds } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const SECRET = 'downstream-secret-0123456789';

const config = (url: string) => `
operations:
  - name: ship_order
    description: Ship an order
    params:
      type: object
      required: [order]
      properties:
        order: { type: string }
    summary: "{{agent}} wants to ship order {{params.order}}."
    approval: { approvers: [web:alice], quorum: 1 }
    commit: on_approve
    executor: { type: http, url: "${url}/ship", secret: "${SECRET}", timeout: 2s }
  - name: refund
    description: Refund a customer
    params:
      type: object
      required: [amount_cents]
      properties:
        amount_cents: { type: integer }
    summary: "{{agent}} wants to refund {{params.amount_cents}} cents."
    policy:
      - when: "params.amount_cents <= 100"
        decide: approve
        reason: small refunds are automatic
    approval: { approvers: [web:alice], quorum: 1 }
    commit: agent
    executor: { type: http, url: "${url}/refund", secret: "${SECRET}", timeout: 2s }
`;

/** A W3C traceparent the agent sends: its own trace and span. */
function agentTrace(traceByte: string, spanByte: string) {
  const traceId = traceByte.repeat(32);
  const spanId = spanByte.repeat(16);
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

const traceIdOf = (traceparent: unknown) => String(traceparent).split('-')[1];
const parentIdOf = (traceparent: unknown) => String(traceparent).split('-')[2];

/** A callback receiver on loopback that answers 200 and hands over each request's headers. */
async function startCallbackReceiver() {
  const arrivals: IncomingHttpHeaders[] = [];
  const waiting: Array<(headers: IncomingHttpHeaders) => void> = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      arrivals.push(req.headers);
      waiting.shift()?.(req.headers);
      res.writeHead(200).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${address.port}/hook`,
    next: () => new Promise<IncomingHttpHeaders>((resolve) => waiting.push(resolve)),
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

function metricCount(body: string, operation: string, decision: string): number {
  const match = new RegExp(`twokey_time_to_decision_seconds_count\\{operation="${operation}",decision="${decision}"\\} (\\d+)`).exec(body);
  return match ? Number(match[1]) : 0;
}

describe.each(drivers)('OpenTelemetry tracing and time to decision (%s)', (driver) => {
  let downstream: FakeDownstream;
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    downstream = await startFakeDownstream(SECRET);
    twokey = await startTestTwokey({ driver, configYaml: config(downstream.url) });
    ({ apiKey } = await twokey.createAgent('argus'));
  });
  afterAll(async () => {
    await twokey.close();
    await downstream.close();
  });

  const metrics = async () => (await twokey.app.inject({ method: 'GET', url: '/metrics' })).body;

  describe('without an OpenTelemetry SDK', () => {
    it('takes a traceparent, stores no trace context, sends none downstream, and still observes the time to decision', async () => {
      downstream.setBehaviour('ok');
      const { traceparent } = agentTrace('1', '2');
      const proposed = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        headers: { traceparent },
        body: { operation: 'ship_order', params: { order: 'o-0' } },
      });
      expect(proposed.status).toBe(201);
      expect((await twokey.services.store.getProposal(proposed.body.id))?.traceContext).toBeNull();

      const arrived = downstream.nextRequest();
      const decided = await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
      expect(decided.proposal.status).toBe('committed');
      expect((await arrived).headers.traceparent).toBeUndefined();
      expect(metricCount(await metrics(), 'ship_order', 'approved')).toBe(1);
    });
  });

  describe('with an SDK registered', () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

    beforeAll(() => {
      trace.setGlobalTracerProvider(provider);
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    });
    afterAll(async () => {
      trace.disable();
      context.disable();
      propagation.disable();
      await provider.shutdown();
    });

    const spansOf = (traceId: string): ReadableSpan[] => exporter.getFinishedSpans().filter((span) => span.spanContext().traceId === traceId);
    const named = (spans: ReadableSpan[], name: string) => {
      const found = spans.filter((span) => span.name === name);
      expect(found, `spans named ${name}`).toHaveLength(1);
      return found[0] as ReadableSpan;
    };

    it('puts propose, wait-for-approval, commit and execute in the agent trace; the executor and the callback receive it', async () => {
      downstream.setBehaviour('ok');
      const receiver = await startCallbackReceiver();
      try {
        const agent = agentTrace('a', 'b');
        const proposed = await twokey.request('POST', '/v1/proposals', {
          apiKey,
          headers: { traceparent: agent.traceparent },
          body: { operation: 'ship_order', params: { order: 'o-1' }, callbackUrl: receiver.url },
        });
        expect(proposed.status).toBe(201);
        const stored = await twokey.services.store.getProposal(proposed.body.id);
        expect(traceIdOf(stored?.traceContext?.traceparent)).toBe(agent.traceId);

        const arrived = downstream.nextRequest();
        const callback = receiver.next();
        // A click: no request context of the agent's; the stored context carries the trace.
        const decided = await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
        expect(decided.proposal.status).toBe('committed');

        const spans = spansOf(agent.traceId);
        const propose = named(spans, 'twokey.propose');
        expect(propose.parentSpanContext?.spanId).toBe(agent.spanId);
        expect(propose.attributes).toMatchObject({
          'twokey.agent': 'argus',
          'twokey.operation': 'ship_order',
          'twokey.proposal.id': proposed.body.id,
          'twokey.outcome': 'pending',
        });
        // Identifiers only: no params, summary or callback URL.
        expect(JSON.stringify(spans.map((span) => span.attributes))).not.toMatch(/o-1|127\.0\.0\.1|ship order/);

        const wait = named(spans, 'twokey.wait_for_approval');
        expect(wait.parentSpanContext?.spanId).toBe(propose.spanContext().spanId);
        expect(wait.attributes).toMatchObject({ 'twokey.decision': 'approved', 'twokey.decided_by': 'person', 'twokey.proposal.id': proposed.body.id });
        expect(hrTimeToMilliseconds(wait.startTime)).toBe(stored?.createdAt.getTime());

        const commit = named(spans, 'twokey.commit');
        expect(commit.parentSpanContext?.spanId).toBe(propose.spanContext().spanId);
        expect(commit.attributes).toMatchObject({ 'twokey.outcome': 'committed', 'twokey.operation': 'ship_order' });
        expect(commit.status.code).not.toBe(SpanStatusCode.ERROR);
        const execute = named(spans, 'twokey.execute');
        expect(execute.parentSpanContext?.spanId).toBe(commit.spanContext().spanId);
        expect(execute.attributes).toMatchObject({ 'twokey.executor.kind': 'remote' });

        const request = await arrived;
        expect(request.signatureValid).toBe(true);
        expect(traceIdOf(request.headers.traceparent)).toBe(agent.traceId);
        expect(parentIdOf(request.headers.traceparent)).toBe(execute.spanContext().spanId);

        const callbackHeaders = await callback;
        expect(traceIdOf(callbackHeaders.traceparent)).toBe(agent.traceId);
        await vi.waitFor(() => expect(spansOf(agent.traceId).some((span) => span.name === 'twokey.callback')).toBe(true));
        const delivery = named(spansOf(agent.traceId), 'twokey.callback');
        expect(parentIdOf(callbackHeaders.traceparent)).toBe(delivery.spanContext().spanId);
        expect(delivery.parentSpanContext?.spanId).toBe(propose.spanContext().spanId);
      } finally {
        receiver.close();
      }
    });

    it("a policy decision and the agent's later commit: in the propose trace, linked to the commit request's trace", async () => {
      downstream.setBehaviour('ok');
      const before = metricCount(await metrics(), 'refund', 'approved');
      const agent = agentTrace('c', 'd');
      const params = { amount_cents: 50 };
      const proposed = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        headers: { traceparent: agent.traceparent },
        body: { operation: 'refund', params },
      });
      expect(proposed.body.status).toBe('approved');

      const later = agentTrace('e', 'f');
      const arrived = downstream.nextRequest();
      const committed = await twokey.request('POST', `/v1/proposals/${proposed.body.id}/commit`, {
        apiKey,
        headers: { traceparent: later.traceparent, 'x-confirmation-token': proposed.body.confirmToken },
        body: { operation: 'refund', params },
      });
      expect(committed).toMatchObject({ status: 200, body: { status: 'committed' } });

      const spans = spansOf(agent.traceId);
      const propose = named(spans, 'twokey.propose');
      expect(propose.attributes).toMatchObject({ 'twokey.outcome': 'approved' });
      expect(named(spans, 'twokey.wait_for_approval').attributes).toMatchObject({ 'twokey.decision': 'approved', 'twokey.decided_by': 'policy' });
      const commit = named(spans, 'twokey.commit');
      expect(commit.parentSpanContext?.spanId).toBe(propose.spanContext().spanId);
      expect(commit.links.map((link) => link.context.traceId)).toEqual([later.traceId]);
      expect(traceIdOf((await arrived).headers.traceparent)).toBe(agent.traceId);
      expect(spansOf(later.traceId)).toEqual([]);
      expect(metricCount(await metrics(), 'refund', 'approved')).toBe(before + 1);
    });

    it('a failed execution fails the commit and execute spans; its retry is no second decision', async () => {
      downstream.setBehaviour('fail');
      const before = metricCount(await metrics(), 'ship_order', 'approved');
      const agent = agentTrace('3', '4');
      const proposed = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        headers: { traceparent: agent.traceparent },
        body: { operation: 'ship_order', params: { order: 'o-2' } },
      });
      const decided = await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
      expect(decided.proposal).toMatchObject({ status: 'approved', error: expect.stringContaining('HTTP 500') });
      await expect(twokey.services.proposals.retry(proposed.body.id, { identity: 'web:alice', via: 'test' })).rejects.toMatchObject({
        code: 'execution_failed',
      });

      const spans = spansOf(agent.traceId);
      const commits = spans.filter((span) => span.name === 'twokey.commit');
      const executes = spans.filter((span) => span.name === 'twokey.execute');
      expect(commits).toHaveLength(2);
      expect(executes).toHaveLength(2);
      for (const span of [...commits, ...executes]) expect(span.status.code).toBe(SpanStatusCode.ERROR);
      expect(commits.map((span) => span.attributes['twokey.error.code'])).toEqual(['execution_failed', 'execution_failed']);
      expect(spans.filter((span) => span.name === 'twokey.wait_for_approval')).toHaveLength(1);
      expect(metricCount(await metrics(), 'ship_order', 'approved')).toBe(before + 1);
    });

    it('a rejection and a cancel end the wait for approval and are observed by decision; a refused proposal fails its span', async () => {
      const agent = agentTrace('5', '6');
      const proposed = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        headers: { traceparent: agent.traceparent },
        body: { operation: 'ship_order', params: { order: 'o-3' } },
      });
      await twokey.services.proposals.reject(proposed.body.id, { identity: 'web:alice', via: 'test' }, 'not today');
      expect(named(spansOf(agent.traceId), 'twokey.wait_for_approval').attributes).toMatchObject({
        'twokey.decision': 'rejected',
        'twokey.decided_by': 'person',
      });
      const body = await metrics();
      expect(metricCount(body, 'ship_order', 'rejected')).toBe(1);
      expect(body).toMatch(/twokey_time_to_decision_seconds_bucket\{le="\+Inf",operation="ship_order",decision="rejected"\} 1/);

      const withdrawn = agentTrace('2', '9');
      const second = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        headers: { traceparent: withdrawn.traceparent },
        body: { operation: 'ship_order', params: { order: 'o-5' } },
      });
      expect((await twokey.request('POST', `/v1/proposals/${second.body.id}/cancel`, { apiKey })).status).toBe(200);
      expect(named(spansOf(withdrawn.traceId), 'twokey.wait_for_approval').attributes).toMatchObject({
        'twokey.decision': 'cancelled',
        'twokey.decided_by': 'agent',
      });
      expect(metricCount(await metrics(), 'ship_order', 'cancelled')).toBe(1);

      const refused = agentTrace('7', '8');
      const answer = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        headers: { traceparent: refused.traceparent },
        body: { operation: 'ship_order', params: { order: 7 } },
      });
      expect(answer.status).toBe(400);
      const span = named(spansOf(refused.traceId), 'twokey.propose');
      expect(span.status).toMatchObject({ code: SpanStatusCode.ERROR, message: 'invalid_params' });
    });

    it('a malformed traceparent is ignored: the proposal starts a trace of its own', async () => {
      downstream.setBehaviour('ok');
      const proposed = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        headers: { traceparent: 'zz-not-a-trace-parent', tracestate: 'x'.repeat(5000) },
        body: { operation: 'ship_order', params: { order: 'o-4' } },
      });
      expect(proposed.status).toBe(201);
      const stored = await twokey.services.store.getProposal(proposed.body.id);
      const traceId = traceIdOf(stored?.traceContext?.traceparent);
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(named(spansOf(traceId ?? ''), 'twokey.propose').parentSpanContext).toBeUndefined();
    });
  });

  describe('the value observed', () => {
    const clock = manualClock();
    let timed: TestTwokey;
    beforeAll(async () => {
      timed = await startTestTwokey({ driver, clock, configYaml: config(downstream.url) });
    });
    afterAll(() => timed.close());

    it('is the time from propose to the decision on the injected clock, for a person and for the expiry sweep', async () => {
      const { apiKey: key } = await timed.createAgent('argus');
      downstream.setBehaviour('ok');
      const approved = await timed.request('POST', '/v1/proposals', { apiKey: key, body: { operation: 'ship_order', params: { order: 'o-6' } } });
      await timed.request('POST', '/v1/proposals', { apiKey: key, body: { operation: 'ship_order', params: { order: 'o-7' } } });
      clock.advance(42_000);
      await timed.services.proposals.approve(approved.body.id, { identity: 'web:alice', via: 'test' });
      // Past the default expiry of 5 minutes: the sweep decides at the time it runs.
      clock.advance(5 * 60_000);
      expect(await timed.services.proposals.expireDue()).toBe(1);
      expect(await timed.services.proposals.expireDue()).toBe(0);

      const body = (await timed.app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(body).toMatch(/twokey_time_to_decision_seconds_sum\{operation="ship_order",decision="approved"\} 42\n/);
      expect(body).toMatch(/twokey_time_to_decision_seconds_bucket\{le="60",operation="ship_order",decision="approved"\} 1\n/);
      expect(body).toMatch(/twokey_time_to_decision_seconds_bucket\{le="30",operation="ship_order",decision="approved"\} 0\n/);
      expect(body).toMatch(new RegExp(`twokey_time_to_decision_seconds_sum\\{operation="ship_order",decision="expired"\\} ${42 + 5 * 60}\\n`));
      expect(metricCount(body, 'ship_order', 'expired')).toBe(1);
    });
  });
});
