import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/pglite';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TwokeyError } from '../../src/core/errors.js';
import { createEmbeddedStorage, type EmbeddedStorage } from '../../src/db/embedded-storage.js';

const MIB = 1024 * 1024;

/** The TwokeyError a failed statement carries under drizzle's wrapper, if any. */
async function refusalOf(statement: Promise<unknown>): Promise<TwokeyError | null> {
  try {
    await statement;
    return null;
  } catch (error) {
    for (let cause: unknown = error; typeof cause === 'object' && cause !== null; cause = (cause as { cause?: unknown }).cause) {
      if (cause instanceof TwokeyError) return cause;
    }
    throw error;
  }
}

/** The guard's rules with the free space told by the test (the real disk is test/faults/full-disk.test.ts). */
describe('the embedded database short of disk space', () => {
  let free = 512 * MIB;
  const logged: Array<{ level: string; message: string }> = [];
  const log = {
    error: (_details: object, message: string) => logged.push({ level: 'error', message }),
    warn: (_details: object, message: string) => logged.push({ level: 'warn', message }),
    info: (_details: object, message: string) => logged.push({ level: 'info', message }),
  };
  let storage: EmbeddedStorage;

  beforeEach(async () => {
    free = 512 * MIB;
    logged.length = 0;
    const client = new PGlite();
    await client.exec('create table notes (id serial primary key, body text)');
    storage = createEmbeddedStorage(client, () => Promise.reject(new Error('not reopened here')), {
      dataDir: '/nowhere',
      minFreeBytes: 64 * MIB,
      log,
      checkIntervalMs: 3_600_000,
      freeBytes: async () => free,
    });
    await storage.start();
  });
  afterEach(() => storage.close());

  const db = () => drizzle({ client: storage.client });
  const write = () => db().execute(sql`insert into notes (body) values ('x')`);
  const read = () => db().execute(sql`select count(*) from notes`);

  it('takes writes above the threshold', async () => {
    expect(await refusalOf(write())).toBeNull();
    expect(storage.problem()).toBeNull();
    expect(logged).toEqual([]);
  });

  it('below it refuses every write with insufficient_storage (507), keeps reads, and says so once; space back, writes resume', async () => {
    free = 64 * MIB - 1;
    await storage.check();
    const refused = await refusalOf(write());
    expect(refused).toMatchObject({ code: 'insufficient_storage', status: 507 });
    expect(await refusalOf(db().transaction(async (tx) => tx.execute(sql`update notes set body = 'y'`)))).toMatchObject({ code: 'insufficient_storage' });
    expect(await refusalOf(read())).toBeNull();
    expect(storage.problem()).toContain('insufficient storage');

    // Still short at the next readings, with more refused writes: nothing more is logged.
    free = 10 * MIB;
    await storage.check();
    await storage.check();
    expect(await refusalOf(write())).toMatchObject({ code: 'insufficient_storage' });
    expect(logged).toEqual([{ level: 'error', message: expect.stringContaining('short of disk space') }]);

    free = 64 * MIB;
    await storage.check();
    expect(await refusalOf(write())).toBeNull();
    expect(storage.problem()).toBeNull();
    expect(logged.map((line) => line.level)).toEqual(['error', 'info']);
    expect(logged[1]?.message).toContain('accepts writes again');
  });

  it('leaves other refusals alone: a read-only transaction of the caller is not a disk problem', async () => {
    const refused = db().transaction(async (tx) => {
      await tx.execute(sql`set transaction read only`);
      await tx.execute(sql`insert into notes (body) values ('x')`);
    });
    await expect(refused).rejects.toMatchObject({ cause: { code: '25006' } });
    expect(storage.problem()).toBeNull();
  });
});
