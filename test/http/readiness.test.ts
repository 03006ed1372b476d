import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const rowsOf = <T>(result: unknown): T[] => (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];

/** /readyz answers "ready" only once the database has committed a write, and says so within its deadline. */
describe.each(drivers)('readiness proves a write (%s)', (driver) => {
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver });
    ({ apiKey } = await twokey.createAgent('argus'));
  });
  afterAll(() => twokey.close());

  const db = () => twokey.services.database.db;
  const probes = async () =>
    rowsOf<{ replica: string }>(await db().execute(sql`select replica from readiness_probes order by replica`)).map((row) => row.replica);

  it('is not ready while the database answers reads but refuses writes, and ready again once it takes them', async () => {
    expect(await twokey.request('GET', '/readyz')).toMatchObject({ status: 200, body: { status: 'ready' } });
    // A database that reads but cannot write (read-only, out of space, a lost privilege) is not ready.
    await db().execute(sql`
      create function refuse_probe() returns trigger language plpgsql as $$ begin raise exception 'writes refused'; end $$`);
    await db().execute(sql`create trigger refuse_probe before insert or update on readiness_probes for each row execute function refuse_probe()`);
    try {
      expect(await twokey.request('GET', '/readyz')).toMatchObject({ status: 503, body: { status: 'not_ready' } });
      expect(await twokey.request('GET', '/v1/operations', { apiKey })).toMatchObject({ status: 200 });
    } finally {
      await db().execute(sql`drop trigger refuse_probe on readiness_probes`);
      await db().execute(sql`drop function refuse_probe()`);
    }
    expect(await twokey.request('GET', '/readyz')).toMatchObject({ status: 200, body: { status: 'ready' } });
  });

  it('keeps one row per replica, and forgets replicas silent for a day', async () => {
    await db().execute(sql`delete from readiness_probes`);
    await db().execute(sql`
      insert into readiness_probes (replica, probed_at) values
        ('r_gone', now() - interval '25 hours'), ('r_alive', now() - interval '1 minute')`);
    for (let probe = 0; probe < 5; probe += 1) expect((await twokey.request('GET', '/readyz')).status).toBe(200);
    expect(await probes()).toEqual(['r_alive', twokey.services.replica].sort());
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)('readiness within its deadline (postgres)', () => {
  let twokey: TestTwokey;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver: 'postgres' });
  });
  afterAll(() => twokey.close());

  it('answers 503 when the write cannot complete in time (the table is locked by another session), 200 once it can', async () => {
    const url = (twokey.services.database as { url?: string }).url;
    if (!url) throw new Error('no database URL');
    const other = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const locked = other.reserve();
      const session = await locked;
      await session`begin`;
      await session`lock table readiness_probes in access exclusive mode`;
      // Reads still answer; the write waits for the lock, past the readiness deadline.
      expect(await twokey.request('GET', '/readyz')).toMatchObject({ status: 503, body: { status: 'not_ready' } });
      await session`rollback`;
      session.release();
      expect(await twokey.request('GET', '/readyz')).toMatchObject({ status: 200, body: { status: 'ready' } });
    } finally {
      await other.end({ timeout: 5 });
    }
  });
});
