import { connect, type Socket } from 'node:net';
import postgres from 'postgres';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pooledClient } from '../../src/db/postgres-client.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';

/**
 * What postgres.js was handed in one turn of the event loop goes out in one write, a statement over
 * 1 KiB included (patches/postgres+3.4.9.patch): a transaction's last statement (its buffered rows,
 * often 1 to 2 KiB) and the COMMIT sent after it reach PostgreSQL together, one write and one wake-up
 * of the backend where the unpatched driver made two (see sendBeforeCommit, src/db/transactions.ts).
 */
/** The types of the protocol messages in one write (each a type byte, then its length, itself included). */
function messageTypes(packet: Buffer): string[] {
  const types: string[] = [];
  for (let at = 0; at < packet.length; at += 1 + packet.readInt32BE(at + 1)) types.push(String.fromCharCode(packet[at]!));
  return types;
}

describeOnPostgres('writes to the database socket', (driver) => {
  let database: Awaited<ReturnType<typeof openTestDatabase>>;
  let client: postgres.Sql;
  const writes: Buffer[] = [];

  /** A connection to the test database whose every write is recorded. */
  const recordingSocket = (url: URL) =>
    new Promise<Socket>((resolve, reject) => {
      const socket = connect(Number(url.port || 5432), url.hostname);
      socket.once('error', reject);
      socket.once('connect', () => {
        const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
        socket.write = ((chunk: Uint8Array | string, ...rest: unknown[]) => {
          writes.push(Buffer.from(chunk));
          return write(chunk, ...rest);
        }) as Socket['write'];
        resolve(socket);
      });
    });

  beforeAll(async () => {
    database = await openTestDatabase(driver, { poolSize: 1 });
    const url = new URL(database.url!);
    // `socket` (a connected socket of one's own) is postgres.js's documented option, missing from its types.
    const options = { max: 1, onnotice: () => {}, socket: () => recordingSocket(url) };
    client = postgres(database.url!, options as postgres.Options<Record<string, postgres.PostgresType>>);
  }, 60_000);
  afterAll(async () => {
    await client?.end();
    await database?.close();
  });

  it('sends a statement over 1 KiB and the COMMIT queued after it in the same turn as one write', async () => {
    const big = 'x'.repeat(2_000);
    const reserved = await client.reserve();
    try {
      // Once first, so the named statement is prepared and its next run is a Bind and an Execute only.
      await reserved.unsafe('select length($1::text) as n', [big], { prepare: true });
      await reserved.unsafe('begin');
      writes.length = 0;
      const statement = reserved.unsafe('select length($1::text) as n', [big], { prepare: true }).execute();
      const [[row], committed] = await Promise.all([statement, reserved`commit`]);
      expect(row).toEqual({ n: 2_000 });
      expect(committed.command).toBe('COMMIT');
      expect(writes).toHaveLength(1);
      expect(writes[0]!.length).toBeGreaterThan(2_000);
      expect(writes[0]!.includes(Buffer.from('commit'))).toBe(true);
    } finally {
      reserved.release();
    }
  });

  it("sends a transaction's statement handed over before its work returns in the packet of its COMMIT, through twokey's transactions", async () => {
    const big = 'y'.repeat(2_000);
    const statement = 'select length($1::text) as n';
    // As the store's transactions run (src/db/postgres-client.ts): BEGIN awaited, COMMIT once the work returns.
    const pooled = pooledClient(client);
    await pooled.begin(async (tx) => tx.unsafe(statement, [big]));
    writes.length = 0;
    let sent: Promise<unknown> | null = null;
    await pooled.begin(async (tx) => {
      // What sendBeforeCommit (src/db/transactions.ts) does with a transaction's buffered rows.
      sent = tx.unsafe(statement, [big]).execute();
    });
    expect(await sent).toEqual([{ n: 2_000 }]);
    // BEGIN, awaited; then one write: the statement's Bind and Execute, and the COMMIT's (a named
    // statement by now), each with its Sync.
    expect(writes).toHaveLength(2);
    expect(writes[0]!.toString('latin1')).toContain('begin');
    expect(writes[1]!.includes(Buffer.from(big))).toBe(true);
    expect(messageTypes(writes[1]!)).toEqual(['B', 'E', 'S', 'B', 'E', 'S']);
  });
});
