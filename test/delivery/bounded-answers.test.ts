import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpAdapter } from '../../src/agp/adapters/http.js';
import type { AdapterContext } from '../../src/agp/adapters/types.js';
import { createHttpExecutor, MAX_RESULT_BYTES } from '../../src/executors/http.js';
import { readBodyUpTo } from '../../src/lib/bounded-body.js';
import { startFloodingServer, type FloodingServer } from '../support/flooding-server.js';

/**
 * What a client may have made the server write when it stops reading at a cap: the cap, plus what
 * the two loopback sockets' buffers and undici's stream queue hold. Far below the 64 MiB the
 * server would send to a client that reads everything.
 */
const BYTES_A_CAPPED_CLIENT_ALLOWS = 16 * 1024 * 1024;

const request = { proposalId: 'prp_flood', operation: 'flood', params: {}, agent: 'argus', approvedBy: ['web:alice'], approvedAt: '2026-11-26T00:00:00.000Z' };

function streamOf(chunks: number[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const size of chunks) controller.enqueue(new Uint8Array(size).fill(120));
      controller.close();
    },
  });
}

describe('readBodyUpTo', () => {
  it('keeps a body of exactly the cap whole, and cuts one byte more to the cap', async () => {
    expect(await readBodyUpTo(streamOf([3, 5]), 8)).toMatchObject({ truncated: false, bytes: Buffer.from('xxxxxxxx') });
    const over = await readBodyUpTo(streamOf([3, 5, 1]), 8);
    expect(over).toMatchObject({ truncated: true });
    expect(over.bytes).toHaveLength(8);
    expect(await readBodyUpTo(null, 8)).toMatchObject({ truncated: false, bytes: Buffer.alloc(0) });
  });

  it('stops pulling from the stream once past the cap', async () => {
    let pulls = 0;
    let cancelled = false;
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulls += 1;
        controller.enqueue(new Uint8Array(1024));
      },
      cancel() {
        cancelled = true;
      },
    });
    const read = await readBodyUpTo(endless, 10 * 1024);
    expect(read.truncated).toBe(true);
    expect(cancelled).toBe(true);
    expect(pulls).toBeLessThanOrEqual(12);
  });
});

describe('answers that do not end', () => {
  let flooding: FloodingServer;
  beforeAll(async () => {
    flooding = await startFloodingServer();
  });
  afterAll(() => flooding.close());

  it('the http executor reads 64 KiB of an endless answer, hangs up, and records it as truncated', async () => {
    const executor = createHttpExecutor({ url: `${flooding.url}/run`, secret: 'flood-secret-0123456789', timeoutMs: 30_000 });
    const result = await executor.run(request);
    expect(result).toEqual({ truncated: true, maxBytes: MAX_RESULT_BYTES, body: 'x'.repeat(MAX_RESULT_BYTES) });
    const answer = flooding.answers.at(-1);
    await answer?.finished;
    expect(answer?.abortedByClient).toBe(true);
    expect(answer?.bytesWritten).toBeLessThan(BYTES_A_CAPPED_CLIENT_ALLOWS);
  });

  it("an AGP business's endless answer is refused after 1 MiB, without reading the rest", async () => {
    const business = createHttpAdapter({ businessId: 'flood', url: `${flooding.url}/agp` });
    const ctx = { fetch: (input: string | URL | Request, init?: RequestInit) => fetch(input, init) } as unknown as AdapterContext;
    await expect(business.discover(ctx)).rejects.toThrow("business 'flood' answered more than 1048576 bytes");
    const answer = flooding.answers.at(-1);
    await answer?.finished;
    expect(answer?.abortedByClient).toBe(true);
    expect(answer?.bytesWritten).toBeLessThan(BYTES_A_CAPPED_CLIENT_ALLOWS);
  });
});

describe('a refusal that does not end', () => {
  let flooding: FloodingServer;
  beforeAll(async () => {
    flooding = await startFloodingServer({ status: 502 });
  });
  afterAll(() => flooding.close());

  it('the http executor fails on the status and reads none of the body', async () => {
    const executor = createHttpExecutor({ url: `${flooding.url}/run`, secret: 'flood-secret-0123456789', timeoutMs: 30_000 });
    await expect(executor.run(request)).rejects.toThrow('executor answered HTTP 502');
    const answer = flooding.answers.at(-1);
    await answer?.finished;
    expect(answer?.abortedByClient).toBe(true);
    expect(answer?.bytesWritten).toBeLessThan(BYTES_A_CAPPED_CLIENT_ALLOWS);
  });
});
