/** The first bytes of a response body, and whether there was more. */
export interface BoundedBody {
  bytes: Buffer;
  /** True when the body went on past the cap: the rest was never read, and the download was aborted. */
  truncated: boolean;
}

/**
 * Reads a downstream service's answer up to `maxBytes` while it streams. `response.text()` would
 * hold a 5 GB (or endless) answer in memory before anything could cut it; here, the first chunk past
 * the cap ends the loop, which cancels a web stream and destroys a Node one, aborting the request
 * and closing its connection, so memory stays within the cap plus one chunk whatever the service sends.
 */
export async function readBodyUpTo(body: AsyncIterable<Uint8Array> | null, maxBytes: number): Promise<BoundedBody> {
  if (!body) return { bytes: Buffer.alloc(0), truncated: false };
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    const room = maxBytes - size;
    if (chunk.byteLength > room) {
      chunks.push(chunk.subarray(0, room));
      size += room;
      return { bytes: Buffer.concat(chunks, size), truncated: true };
    }
    chunks.push(chunk);
    size += chunk.byteLength;
  }
  return { bytes: Buffer.concat(chunks, size), truncated: false };
}
