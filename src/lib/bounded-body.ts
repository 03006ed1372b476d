/** The first bytes of a response body, and whether there was more. */
export interface BoundedBody {
  bytes: Buffer;
  /** True when the body went on past the cap: the rest was never read, and the download was aborted. */
  truncated: boolean;
}

/**
 * Reads a downstream service's answer up to `maxBytes` while it streams. `response.text()` would
 * hold a 5 GB (or endless) answer in memory before anything could cut it; here, the first chunk past
 * the cap cancels the stream, which aborts the request and closes its connection, so memory stays
 * within the cap plus one chunk whatever the service sends.
 */
export async function readBodyUpTo(body: ReadableStream<Uint8Array> | null, maxBytes: number): Promise<BoundedBody> {
  if (!body) return { bytes: Buffer.alloc(0), truncated: false };
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { bytes: Buffer.concat(chunks, size), truncated: false };
    const room = maxBytes - size;
    if (value.byteLength > room) {
      chunks.push(value.subarray(0, room));
      size += room;
      await reader.cancel().catch(() => undefined);
      return { bytes: Buffer.concat(chunks, size), truncated: true };
    }
    chunks.push(value);
    size += value.byteLength;
  }
}
