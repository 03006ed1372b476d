import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';

/** One answer the server streamed: how many bytes the client let it write, and when it stopped. */
export interface FloodedAnswer {
  bytesWritten: number;
  /** Resolves once the response is over: the client went away, or the ceiling was reached. */
  finished: Promise<void>;
  /** True when the client hung up before the ceiling. */
  abortedByClient: boolean;
}

const CHUNK = Buffer.alloc(64 * 1024, 'x');

/**
 * A downstream service that answers (200 unless told otherwise) and then streams `x`s without end (up to `ceilingBytes`, so
 * a client that reads everything still finishes). It writes only as fast as the client reads
 * (it waits for 'drain'), so `bytesWritten` is what the client consumed plus what the two sockets'
 * buffers hold: the measure of how much a client reads of an endless answer, in bytes, not time.
 */
export async function startFloodingServer(options: { status?: number; ceilingBytes?: number } = {}) {
  const answers: FloodedAnswer[] = [];
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => answers.push(flood(response, options.status ?? 200, options.ceilingBytes ?? 64 * 1024 * 1024)));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    answers,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

function flood(response: ServerResponse, status: number, ceilingBytes: number): FloodedAnswer {
  let settle: () => void = () => undefined;
  const answer: FloodedAnswer = { bytesWritten: 0, abortedByClient: false, finished: new Promise((resolve) => (settle = resolve)) };
  response.on('close', () => {
    answer.abortedByClient = !response.writableFinished;
    settle();
  });
  response.writeHead(status, { 'content-type': 'application/json' });
  const pump = () => {
    while (!response.destroyed && answer.bytesWritten < ceilingBytes) {
      answer.bytesWritten += CHUNK.length;
      if (!response.write(CHUNK)) return void response.once('drain', pump);
    }
    if (!response.destroyed) response.end();
  };
  pump();
  return answer;
}

export type FloodingServer = Awaited<ReturnType<typeof startFloodingServer>>;
