import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdminOperation } from '../../src/admin/operations.js';
import { proposalBindingHash, stepUpChallenge } from '../../src/core/step-up.js';
import type { Executor } from '../../src/core/executor.js';
import { pruneExpired } from '../../src/db/retention.js';
import { passkeys } from '../../src/db/schema.js';
import { CHALLENGE_TTL_MS } from '../../src/passkeys/service.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { configYaml, deleteWorkspaceOperation, upgradePlanOperation } from '../support/operations.js';
import { SoftwareAuthenticator } from '../support/software-authenticator.js';
import { startConsoleTwokey, type ConsoleTwokey } from './support.js';

/** `delete_workspace` asks for a passkey; `upgrade_plan` only when a policy rule says so (the enterprise plan). */
export const STEP_UP_CONFIG = configYaml([
  `${deleteWorkspaceOperation({ approvers: ['web:operator', 'web:reviewer'], commit: 'on_approve' })}    stepUp: passkey\n`,
  upgradePlanOperation({
    approvers: ['web:operator'],
    commit: 'on_approve',
    policy: [{ when: 'params.plan == "enterprise"', decide: 'require', stepUp: 'passkey', reason: 'enterprise contracts need a passkey' }],
  }),
]);

/** app.inject's Host is localhost:80; the browser would write its origin without the default port. */
const ORIGIN = 'http://localhost';

describe.each(drivers)('passkey step-up in the console (%s)', (driver) => {
  const clock = manualClock();
  const runs: string[] = [];
  const executor: Executor = {
    kind: 'local',
    async run(request) {
      runs.push(request.proposalId);
      return { deleted: request.params.workspace };
    },
  };
  let twokey: ConsoleTwokey;
  let apiKey: string;
  let operator: { cookie: string; csrf: string };
  const laptop = new SoftwareAuthenticator(ORIGIN);

  beforeAll(async () => {
    twokey = await startConsoleTwokey({ driver, clock, configYaml: STEP_UP_CONFIG, executorFor: () => executor });
    ({ apiKey } = await twokey.createAgent('cleaner', { owners: ['web:owner'] }));
    operator = await twokey.signIn('operator');
  }, 120_000);
  afterAll(() => twokey?.close());

  const json = (body: string) => JSON.parse(body) as { nonce: string; options: { challenge: string }; error?: string };

  async function register(who: { cookie: string; csrf: string }, authenticator: SoftwareAuthenticator, label: string) {
    const options = await twokey.form('/console/passkeys/options', { _csrf: who.csrf }, { cookie: who.cookie });
    expect(options.status).toBe(200);
    const { nonce, options: created } = json(options.body);
    const credential = JSON.stringify(authenticator.register(created.challenge));
    return twokey.form('/console/passkeys', { _csrf: who.csrf, nonce, credential, label }, { cookie: who.cookie });
  }

  async function challengeFor(id: string, who = operator) {
    const response = await twokey.form(`/console/proposals/${id}/passkey-options`, { _csrf: who.csrf }, { cookie: who.cookie });
    return { status: response.status, ...json(response.body) };
  }

  const approve = (id: string, fields: Record<string, string>, who = operator) =>
    twokey.form(`/console/proposals/${id}/approve`, { _csrf: who.csrf, ...fields }, { cookie: who.cookie });

  const proposal = async (id: string) => (await twokey.services.store.getProposal(id))!;
  const newProposal = async (workspace: string) => (await twokey.propose(apiKey, 'delete_workspace', { workspace })).id;

  it('registers passkeys for the signed-in person, lists them, and audits it', async () => {
    const registered = await register(operator, laptop, 'laptop');
    expect(registered.status).toBe(303);
    expect(registered.headers.location).toBe('/console/passkeys?done=passkey-registered');
    const page = await twokey.page('/console/passkeys', operator.cookie);
    expect(page.body).toContain('laptop');
    expect(page.body).toContain('1 passkey in force');
    const audit = await twokey.services.audit.list({ limit: 1000 });
    expect(audit.find((event) => event.type === 'passkey.registered')).toMatchObject({
      actor: 'web:operator',
      data: { credentialId: laptop.id, label: 'laptop' },
    });
  });

  it('refuses a registration answering a spent challenge, or signed for another origin', async () => {
    const options = json((await twokey.form('/console/passkeys/options', { _csrf: operator.csrf }, { cookie: operator.cookie })).body);
    const elsewhere = new SoftwareAuthenticator('http://evil.localhost');
    const wrongOrigin = await twokey.form(
      '/console/passkeys',
      { _csrf: operator.csrf, nonce: options.nonce, credential: JSON.stringify(elsewhere.register(options.options.challenge)), label: 'evil' },
      { cookie: operator.cookie },
    );
    expect(wrongOrigin.status).toBe(403);
    expect(wrongOrigin.body).toContain('could not be registered');
    const noCredential = await twokey.form('/console/passkeys', { _csrf: operator.csrf, nonce: options.nonce, label: 'x' }, { cookie: operator.cookie });
    expect(noCredential.status).toBe(403);
    expect((await twokey.services.passkeys.list('web:operator')).map((p) => p.label)).toEqual(['laptop']);
  });

  it('refuses an approval without an assertion, with the reason, and changes nothing', async () => {
    const id = await newProposal('acme');
    const refused = await approve(id, {});
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('needs your passkey');
    expect(await twokey.services.store.listApprovals(id)).toEqual([]);
    expect((await proposal(id)).status).toBe('pending');
    // The plain button is not offered; the passkey one is.
    const page = await twokey.page(`/console/proposals/${id}`, operator.cookie);
    expect(page.body).toContain('Approve with passkey');
    expect(page.body).toContain('data-passkey="approve"');
  });

  it('binds the challenge to the proposal: an assertion for one is refused on another, then approves its own once', async () => {
    const first = await newProposal('first');
    const second = await newProposal('second');
    const challenge = await challengeFor(first);
    expect(challenge.status).toBe(200);
    expect(challenge.options.challenge).toBe(stepUpChallenge(proposalBindingHash(await proposal(first)), challenge.nonce));
    const credential = JSON.stringify(laptop.assert(challenge.options.challenge));

    const onAnother = await approve(second, { nonce: challenge.nonce, credential });
    expect(onAnother.status).toBe(403);
    expect(onAnother.body).toContain('made for another proposal');
    expect((await proposal(second)).status).toBe('pending');

    const approved = await approve(first, { nonce: challenge.nonce, credential });
    expect(approved.status).toBe(303);
    expect((await proposal(first)).status).toBe('committed');
    expect(runs.filter((id) => id === first)).toHaveLength(1);
    const [approval] = await twokey.services.store.listApprovals(first);
    expect(approval?.stepUp).toMatchObject({
      kind: 'passkey',
      credentialId: laptop.id,
      nonce: challenge.nonce,
      bindingHash: proposalBindingHash(await proposal(first)),
    });
    const recorded = (await twokey.services.audit.list({ proposalId: first })).find((event) => event.type === 'approval.recorded');
    expect(recorded?.data.stepUp).toMatchObject({
      credentialId: laptop.id,
      signature: expect.any(String),
      authenticatorDataHash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });

    // The same assertion again, on a fresh proposal with the spent nonce: refused.
    const replayed = await approve(second, { nonce: challenge.nonce, credential });
    expect(replayed.status).toBe(403);
    expect((await proposal(second)).status).toBe('pending');
    expect(runs.filter((id) => id === second)).toHaveLength(0);
  });

  it.each([
    ['signed for another origin', { origin: 'http://evil.localhost' }, 'did not verify'],
    ['without user verification', { userVerified: false }, 'did not verify'],
    ['for another RP ID', { rpId: 'evil.localhost' }, 'did not verify'],
    ['with a counter that went backwards', { counter: 1 }, 'counter value 1 was lower'],
  ])('refuses an assertion %s', async (_name, options, reason) => {
    const id = await newProposal(`bad-${String(Object.keys(options)[0])}`);
    const challenge = await challengeFor(id);
    const refused = await approve(id, { nonce: challenge.nonce, credential: JSON.stringify(laptop.assert(challenge.options.challenge, options)) });
    expect(refused.status).toBe(403);
    expect(refused.body).toContain(reason);
    expect(await twokey.services.store.listApprovals(id)).toEqual([]);
  });

  it('refuses a tampered signature and a passkey of someone else', async () => {
    const id = await newProposal('tampered');
    const challenge = await challengeFor(id);
    const assertion = laptop.assert(challenge.options.challenge);
    const flipped = Buffer.from(assertion.response.signature, 'base64url');
    flipped.writeUInt8(flipped.readUInt8(flipped.length - 1) ^ 1, flipped.length - 1);
    const tampered = { ...assertion, response: { ...assertion.response, signature: flipped.toString('base64url') } };
    expect((await approve(id, { nonce: challenge.nonce, credential: JSON.stringify(tampered) })).status).toBe(403);

    const reviewer = await twokey.signIn('reviewer');
    const theirs = new SoftwareAuthenticator(ORIGIN);
    expect((await register(reviewer, theirs, 'phone')).status).toBe(303);
    const again = await challengeFor(id);
    const refused = await approve(id, { nonce: again.nonce, credential: JSON.stringify(theirs.assert(again.options.challenge)) });
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('not one of yours');
    expect((await proposal(id)).status).toBe('pending');
  });

  it('asks for a passkey when a policy rule that requires approval says so, and only then', async () => {
    const { id: enterprise } = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'enterprise' });
    expect((await proposal(enterprise)).stepUp).toBe('passkey');
    const refused = await approve(enterprise, {});
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('needs your passkey');
    const challenge = await challengeFor(enterprise);
    expect(challenge.status).toBe(200);
    expect((await approve(enterprise, { nonce: challenge.nonce, credential: JSON.stringify(laptop.assert(challenge.options.challenge)) })).status).toBe(303);
    expect((await proposal(enterprise)).status).toBe('committed');

    const { id: pro } = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'pro' });
    expect((await proposal(pro)).stepUp ?? null).toBeNull();
    expect((await approve(pro, {})).status).toBe(303);
    expect((await proposal(pro)).status).toBe('committed');
  });

  it('never needs a passkey to reject', async () => {
    const id = await newProposal('rejected');
    const rejected = await twokey.form(`/console/proposals/${id}/reject`, { _csrf: operator.csrf, reason: 'no' }, { cookie: operator.cookie });
    expect(rejected.status).toBe(303);
    expect((await proposal(id)).status).toBe('rejected');
  });

  it('`twokey audit verify` re-checks the stored assertion, and names it once the public key no longer matches', async () => {
    await twokey.audit.flush();
    expect(await runAdminOperation(twokey.services, 'audit.verify', {})).toMatchObject({ ok: true, passkeyAssertions: 2 });
    const db = twokey.services.database.db;
    const [stored] = await db.select().from(passkeys).where(eq(passkeys.credentialId, laptop.id));
    const other = new SoftwareAuthenticator(ORIGIN).register('x');
    const otherKey = (await import('@simplewebauthn/server')).verifyRegistrationResponse;
    const { registrationInfo } = await otherKey({
      response: other,
      expectedChallenge: 'x',
      expectedOrigin: ORIGIN,
      expectedRPID: 'localhost',
      requireUserVerification: true,
    });
    await db.execute(
      sql`update passkeys set public_key = ${Buffer.from(registrationInfo!.credential.publicKey).toString('base64url')} where credential_id = ${laptop.id}`,
    );
    const broken = (await runAdminOperation(twokey.services, 'audit.verify', {})) as Record<string, unknown>;
    expect(broken).toMatchObject({ ok: false, passkeyAssertions: 1 });
    expect(String(broken.reason)).toContain('signature does not verify');
    await db.execute(sql`update passkeys set public_key = ${stored!.publicKey} where credential_id = ${laptop.id}`);
  });

  it('revokes a passkey: audited, and it approves nothing more', async () => {
    const revoked = await twokey.form(`/console/passkeys/${laptop.id}/revoke`, { _csrf: operator.csrf }, { cookie: operator.cookie });
    expect(revoked.status).toBe(303);
    const audit = await twokey.services.audit.list({ limit: 1000 });
    expect(audit.find((event) => event.type === 'passkey.revoked')).toMatchObject({ actor: 'web:operator', data: { credentialId: laptop.id } });
    const id = await newProposal('after-revoke');
    const challenge = await challengeFor(id);
    expect(challenge.status).toBe(403);
    expect(challenge.error).toContain('no passkey');
  });

  it('prunes challenges once they expired, and only then', async () => {
    const db = twokey.services.database.db;
    expect((await pruneExpired(db, clock())).passkey_challenges).toBe(0);
    expect((await pruneExpired(db, new Date(clock().getTime() + CHALLENGE_TTL_MS))).passkey_challenges).toBeGreaterThan(0);
  });
});
