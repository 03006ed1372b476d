import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

describe.each(drivers)('audit chain verdicts (%s)', (driver) => {
  const clock = manualClock();
  let twokey: TestTwokey;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, clock });
    const { apiKey } = await twokey.createAgent('audited');
    await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'delete_workspace', params: { workspace: 'w' } } });
    await twokey.audit.flush();
  }, 180_000);
  afterAll(() => twokey.close());

  it('pages get a verdict at most 30 s old; the full verify always sees tampering at once', async () => {
    expect(await twokey.services.audit.verifyRecent()).toMatchObject({ ok: true });
    const db = twokey.services.database.db;
    await db.execute(sql`alter table audit_events disable trigger audit_events_append_only`);
    await db.execute(sql`update audit_events set actor = 'web:mallory' where seq = 2`);
    await db.execute(sql`alter table audit_events enable trigger audit_events_append_only`);

    expect(await twokey.services.audit.verify()).toMatchObject({ ok: false, seq: 2 });
    clock.advance(29_000);
    expect(await twokey.services.audit.verifyRecent()).toMatchObject({ ok: true });
    clock.advance(2_000);
    expect(await twokey.services.audit.verifyRecent()).toMatchObject({ ok: false, seq: 2, reason: 'row content does not match its hash' });
  });
});
