import { createHash } from 'node:crypto';
import { verifyRegistrationResponse } from '@simplewebauthn/server';
import { describe, expect, it } from 'vitest';
import { isTwokeyError } from '../../src/core/errors.js';
import type { ProposalRecord } from '../../src/core/model.js';
import type { PasskeyProof } from '../../src/core/model.js';
import { checkStepUp, proposalBindingHash, stepUpChallenge } from '../../src/core/step-up.js';
import { paramsHash, sha256Hex } from '../../src/core/secrets.js';
import type { PasskeyRecord } from '../../src/passkeys/ports.js';
import { recheckProof } from '../../src/passkeys/recheck.js';
import { SoftwareAuthenticator } from '../support/software-authenticator.js';

const ORIGIN = 'https://twokey.example.test';
const NONCE = Buffer.alloc(32, 7).toString('base64url');

function proposalWith(id: string, params: Record<string, unknown>): ProposalRecord {
  return {
    id,
    agentId: 'agt_1',
    operation: 'delete_workspace',
    params,
    paramsHash: paramsHash(params),
    summary: 's',
    summaryHash: sha256Hex('s'),
  } as ProposalRecord;
}

const stepUp = { stepUp: 'passkey' as const };
const decider = (proof?: PasskeyProof) => ({ identity: 'web:alice', via: 'web', ...(proof ? { stepUp: proof } : {}) });

async function passkeyOf(authenticator: SoftwareAuthenticator): Promise<PasskeyRecord> {
  const { registrationInfo } = await verifyRegistrationResponse({
    response: authenticator.register('Y2hhbGxlbmdl'),
    expectedChallenge: 'Y2hhbGxlbmdl',
    expectedOrigin: ORIGIN,
    expectedRPID: 'twokey.example.test',
  });
  const credential = registrationInfo!.credential;
  return {
    credentialId: credential.id,
    owner: 'web:alice',
    label: 'k',
    publicKey: Buffer.from(credential.publicKey).toString('base64url'),
    counter: 0,
    transports: [],
    createdAt: new Date(),
    lastUsedAt: null,
    revokedAt: null,
  };
}

/** A proof as the passkey service builds it, from a real signature of the software authenticator. */
function proofFor(authenticator: SoftwareAuthenticator, proposal: ProposalRecord, nonce = NONCE): PasskeyProof {
  const bindingHash = proposalBindingHash(proposal);
  const { response } = authenticator.assert(stepUpChallenge(bindingHash, nonce));
  const hex = (value: string) => createHash('sha256').update(Buffer.from(value, 'base64url')).digest('hex');
  return {
    kind: 'passkey',
    credentialId: authenticator.id,
    nonce,
    bindingHash,
    ...response,
    authenticatorDataHash: hex(response.authenticatorData),
    clientDataHash: hex(response.clientDataJSON),
    counter: 1,
  } as PasskeyProof;
}

const refusalOf = (run: () => void) => {
  try {
    run();
  } catch (error) {
    if (isTwokeyError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  return null;
};

describe('the step-up challenge', () => {
  const proposal = proposalWith('prp_a', { workspace: 'acme' });

  it('depends on the proposal id, its params and the nonce', () => {
    const base = stepUpChallenge(proposalBindingHash(proposal), NONCE);
    expect(stepUpChallenge(proposalBindingHash(proposalWith('prp_b', { workspace: 'acme' })), NONCE)).not.toBe(base);
    expect(stepUpChallenge(proposalBindingHash(proposalWith('prp_a', { workspace: 'other' })), NONCE)).not.toBe(base);
    expect(stepUpChallenge(proposalBindingHash(proposal), Buffer.alloc(32, 8).toString('base64url'))).not.toBe(base);
    // Key order does not change the params' hash, so it does not change the binding either.
    expect(proposalBindingHash(proposalWith('prp_a', { b: 1, a: 2 }))).toBe(proposalBindingHash(proposalWith('prp_a', { a: 2, b: 1 })));
    expect(base).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('is SHA-256 of the binding hash bytes followed by the nonce bytes', () => {
    const binding = proposalBindingHash(proposal);
    const expected = createHash('sha256')
      .update(Buffer.concat([Buffer.from(binding, 'hex'), Buffer.from(NONCE, 'base64url')]))
      .digest('base64url');
    expect(stepUpChallenge(binding, NONCE)).toBe(expected);
  });
});

describe('checkStepUp (the core refuses an approval without a proof for this proposal)', () => {
  const proposal = proposalWith('prp_a', { workspace: 'acme' });
  const authenticator = new SoftwareAuthenticator(ORIGIN);

  it('lets an operation without step-up through, proof or not', () => {
    expect(refusalOf(() => checkStepUp({}, proposal, decider()))).toBeNull();
  });

  it('refuses no proof, naming where to approve', () => {
    const refusal = refusalOf(() => checkStepUp(stepUp, proposal, decider(), (id) => `${ORIGIN}/console/proposals/${id}`));
    expect(refusal).toMatchObject({ code: 'step_up_required' });
    expect(refusal?.message).toContain(`${ORIGIN}/console/proposals/prp_a`);
  });

  it('refuses a proof made for another proposal, or whose client data signed another challenge', () => {
    const other = proofFor(authenticator, proposalWith('prp_b', { workspace: 'acme' }));
    expect(refusalOf(() => checkStepUp(stepUp, proposal, decider(other)))).toMatchObject({ code: 'step_up_failed' });
    const relabelled = { ...other, bindingHash: proposalBindingHash(proposal) };
    expect(refusalOf(() => checkStepUp(stepUp, proposal, decider(relabelled)))).toMatchObject({ code: 'step_up_failed' });
    expect(refusalOf(() => checkStepUp(stepUp, proposal, decider(proofFor(authenticator, proposal))))).toBeNull();
  });
});

describe('recheckProof (what `twokey audit verify` checks again)', () => {
  const proposal = proposalWith('prp_a', { workspace: 'acme' });
  const authenticator = new SoftwareAuthenticator(ORIGIN);

  it('holds for a stored assertion with the stored public key', async () => {
    expect(await recheckProof(proofFor(authenticator, proposal), proposal, await passkeyOf(authenticator))).toBeNull();
  });

  it('names each way a stored assertion can fail', async () => {
    const passkey = await passkeyOf(authenticator);
    const proof = proofFor(authenticator, proposal);
    const signature = Buffer.from(proof.signature, 'base64url');
    signature.writeUInt8(signature.readUInt8(signature.length - 1) ^ 1, signature.length - 1);
    expect(await recheckProof({ ...proof, signature: signature.toString('base64url') }, proposal, passkey)).toContain('signature does not verify');
    expect(await recheckProof(proof, proposal, await passkeyOf(new SoftwareAuthenticator(ORIGIN)))).toContain('signature does not verify');
    expect(await recheckProof(proof, proposalWith('prp_a', { workspace: 'changed' }), passkey)).toContain('other params');
    expect(await recheckProof({ ...proof, nonce: Buffer.alloc(32, 9).toString('base64url') }, proposal, passkey)).toContain('signed challenge');
    expect(await recheckProof(proof, proposal, null)).toContain('not in the passkeys table');
    expect(await recheckProof(proof, null, passkey)).toContain('missing');
  });
});
