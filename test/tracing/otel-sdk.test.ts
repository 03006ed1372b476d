/**
 * Tracing out of the box: a real `twokey serve` whose environment sets only
 * OTEL_EXPORTER_OTLP_ENDPOINT (no preload, no other OTEL_* variable) exports its spans over
 * OTLP/HTTP, in the default protobuf encoding, to a local receiver.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { startTelemetry, tracesRequested } from '../../src/tracing/sdk.js';
import { binPath, freePort, PROCESS_TEST_TIMEOUT_MS, runCli } from '../support/processes.js';
import { decodeTraceExport, startOtlpReceiver, type ReceivedSpan } from '../support/otlp.js';
import { existingEmbeddedDatabase } from '../support/embedded-template.js';

/** The runner's environment without any OTEL_* variable of its own, so only the test's reach twokey. */
function environmentWithoutOtel(extra: Record<string, string>): Record<string, string> {
  const inherited = Object.entries(process.env).filter((entry): entry is [string, string] => !entry[0].startsWith('OTEL_') && entry[1] !== undefined);
  return { ...Object.fromEntries(inherited), DATABASE_URL: '', TWOKEY_CONFIG: '', ...extra };
}

/** `twokey serve` from the sources, resolved once it answers /healthz. */
async function serve(env: Record<string, string>): Promise<{ child: ChildProcess; url: string; stop(): Promise<number | null> }> {
  // In the data directory: no stray .env or twokey.config.yaml there.
  const child = spawn(process.execPath, [binPath, 'serve'], { cwd: env.TWOKEY_DATA_DIR, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const url = `http://127.0.0.1:${env.PORT}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`twokey serve exited early:\n${output}`);
    if (
      await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await new Promise((done) => setTimeout(done, 100));
  }
  return {
    child,
    url,
    async stop() {
      child.kill('SIGTERM');
      const [code] = (await once(child, 'close')) as [number | null];
      return code;
    },
  };
}

describe('the OpenTelemetry SDK started by twokey itself', { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  let dataDir: string;
  let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'twokey-otel-'));
    await existingEmbeddedDatabase(dataDir);
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    for (const path of [dataDir, `${dataDir}.audit-key.pem`, `${dataDir}.audit-checkpoints`]) await rm(path, { recursive: true, force: true });
  });

  it('is asked for by the standard variables only', () => {
    expect(tracesRequested({})).toBe(false);
    expect(tracesRequested({ OTEL_SERVICE_NAME: 'twokey' })).toBe(false);
    expect(tracesRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracesRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(tracesRequested({ OTEL_TRACES_EXPORTER: 'console' })).toBe(true);
    expect(tracesRequested({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(false);
    expect(tracesRequested({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(false);
  });

  it('starts nothing when not asked, nor over an SDK the operator preloaded', async () => {
    expect(await startTelemetry({}, '1.0.0')).toBeNull();
    // What `node --import ./tracing.mjs` leaves behind: a registered tracer provider.
    const preloaded = new BasicTracerProvider();
    trace.setGlobalTracerProvider(preloaded);
    try {
      expect(await startTelemetry({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }, '1.0.0')).toBeNull();
    } finally {
      trace.disable();
      await preloaded.shutdown();
    }
  });

  it("with only OTEL_EXPORTER_OTLP_ENDPOINT set, the receiver gets a proposal's spans in the agent's trace", async () => {
    const env = environmentWithoutOtel({
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      TWOKEY_DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    });
    const server = await serve(env);
    let proposalId = '';
    const traceId = 'a1'.repeat(16);
    try {
      const created = await runCli(['agents', 'create', 'argus', '--owner', 'web:alice'], env);
      const apiKey = created.stdout.trim().split('\n').at(-1) ?? '';
      const proposed = (await fetch(`${server.url}/v1/proposals`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', traceparent: `00-${traceId}-${'b2'.repeat(8)}-01` },
        body: JSON.stringify({ operation: 'upgrade_plan', params: { org: 'acme', plan: 'scale' } }),
      }).then((r) => r.json())) as { id: string };
      proposalId = proposed.id;
      expect((await runCli(['proposals', 'approve', proposalId, '--as', 'web:operator'], env)).code).toBe(0);
    } finally {
      // The SDK sends what it still buffers when twokey shuts down.
      expect(await server.stop()).toBe(0);
    }

    expect(receiver.requests.length).toBeGreaterThan(0);
    // Only traces: twokey's metrics stay on /metrics, its logs on stdout.
    expect(new Set(receiver.requests.map((request) => request.path))).toEqual(new Set(['/v1/traces']));
    expect(receiver.requests[0]?.headers['content-type']).toBe('application/x-protobuf');
    const spans: ReceivedSpan[] = receiver.requests.flatMap((request) => decodeTraceExport(request.body));
    const ofProposal = spans.filter((span) => span.attributes['twokey.proposal.id'] === proposalId);
    expect(ofProposal.map((span) => span.name).sort()).toEqual(['twokey.commit', 'twokey.execute', 'twokey.propose', 'twokey.wait_for_approval']);
    expect(new Set(ofProposal.map((span) => span.traceId))).toEqual(new Set([traceId]));
    const propose = ofProposal.find((span) => span.name === 'twokey.propose');
    expect(propose?.parentSpanId).toBe('b2'.repeat(8));
    expect(ofProposal.find((span) => span.name === 'twokey.commit')?.parentSpanId).toBe(propose?.spanId);
    const { version } = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(propose?.resource).toMatchObject({ 'service.name': 'twokey', 'service.version': version });
  });
});
