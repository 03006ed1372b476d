import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSigner, parseAuditKey } from '../../src/config/audit-key.js';
import { publicKeyText } from '../../src/core/audit-chain.js';
import { rewriteAndRechain, rowsOf } from '../support/audit.js';
import { manualClock } from '../support/clock.js';
import { drivers, openTestDatabase } from '../support/database.js';
import { startTestTwokey, TEST_AUDIT_KEY } from '../support/twokey.js';
import { startConsoleTwokey, type ConsoleTwokey } from './support.js';

const pinnedKey = publicKeyText(createSigner(parseAuditKey(TEST_AUDIT_KEY)).publicKey);
/** A page's verdict is kept 30 s (by the clock); past that it is recomputed. */
const VERDICT_AGE_MS = 31_000;

describe.each(drivers)("the console's audit chain verdict (%s)", (driver) => {
  const clock = manualClock();
  let twokey: ConsoleTwokey;
  let proposalId: string;
  let cookie: string;

  beforeAll(async () => {
    twokey = await startConsoleTwokey({ driver, clock, env: { TWOKEY_AUDIT_PUBLIC_KEY: pinnedKey } });
    const { apiKey } = await twokey.createAgent('audited');
    const signedIn = await twokey.signIn('operator');
    cookie = signedIn.cookie;
    ({ id: proposalId } = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'scale' }));
    await twokey.form(`/console/proposals/${proposalId}/approve`, { _csrf: signedIn.csrf }, { cookie });
    await twokey.audit.flush();
  }, 120_000);
  afterAll(() => twokey.close());

  const chainLine = async () => {
    clock.advance(VERDICT_AGE_MS);
    const page = await twokey.page(`/console/proposals/${proposalId}`, cookie);
    expect(page.status).toBe(200);
    return /<p class="chain [^"]*"[^>]*>[\s\S]*?<\/p>/.exec(page.body)?.[0] ?? '';
  };

  it('calls the chain intact when it matches the newest signed checkpoint, checked with the pinned key', async () => {
    const line = await chainLine();
    expect(line).toContain('Audit chain intact');
    expect(line).toMatch(/matching the newest signed checkpoint \(\d+ events, signed <time/);
  });

  it('says BROKEN after a rewrite with every later hash recomputed, which the links alone cannot see', async () => {
    const db = twokey.services.database.db;
    const [approval] = (await rowsOf(db)).filter((row) => row.proposal_id === proposalId && row.type === 'approval.recorded');
    expect(approval).toBeDefined();
    await rewriteAndRechain(db, () => db.execute(sql`update audit_events set actor = 'web:mallory' where id = ${approval!.id}`));
    // The chain alone is fooled: this is what the page used to show as "intact".
    expect(await twokey.services.audit.verify()).toMatchObject({ ok: true });
    const line = await chainLine();
    expect(line).toContain('Audit chain BROKEN');
    expect(line).toContain(`at event #${String(approval!.seq)}`);
    expect(line).toContain('differs from the checkpoint');

    await rewriteAndRechain(db, () => db.execute(sql`update audit_events set actor = 'web:operator' where id = ${approval!.id}`));
    expect(await chainLine()).toContain('Audit chain intact');
  });

  it('says BROKEN after the newest rows are deleted', async () => {
    const db = twokey.services.database.db;
    const size = (await rowsOf(db)).length;
    await db.execute(sql`alter table audit_events disable trigger audit_events_append_only`);
    await db.execute(sql`delete from audit_events where seq = ${size}`);
    await db.execute(sql`alter table audit_events enable trigger audit_events_append_only`);
    const line = await chainLine();
    expect(line).toContain('Audit chain BROKEN');
    expect(line).toContain('gone from the table');
  });
});

describe.each(drivers)('the audit verdict before any checkpoint, and a pinned key that is not the signer (%s)', (driver) => {
  it('does not call a chain with no signed checkpoint intact: it has links, not a proof', async () => {
    // The integrator never runs here: no row is placed and no checkpoint exists.
    const twokey = await startConsoleTwokey({ driver, auditIntervalMs: 3_600_000 });
    try {
      const { apiKey } = await twokey.createAgent('early');
      const { id } = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'pro' });
      const { cookie } = await twokey.signIn('operator');
      const page = await twokey.page(`/console/proposals/${id}`, cookie);
      expect(page.body).toContain('Audit chain links verified');
      expect(page.body).toContain('no signed checkpoint');
      expect(page.body).not.toContain('Audit chain intact');
    } finally {
      await twokey.close();
    }
  });

  it('refuses to start when TWOKEY_AUDIT_PUBLIC_KEY leaves out the key it signs with', async () => {
    const other = publicKeyText(createSigner(parseAuditKey(Buffer.alloc(32, 9).toString('base64'))).publicKey);
    const database = await openTestDatabase(driver);
    try {
      await expect(startTestTwokey({ driver, database, env: { TWOKEY_AUDIT_PUBLIC_KEY: other } })).rejects.toThrow(
        /TWOKEY_AUDIT_PUBLIC_KEY: does not include the key twokey signs checkpoints with/,
      );
    } finally {
      await database.close();
    }
  });
});
