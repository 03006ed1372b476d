import { createHash } from 'node:crypto';
import { verifySignature } from '@simplewebauthn/server/helpers';
import type { AuditEventRecord, ProposalRecord } from '../core/model.js';
import type { PasskeyProof } from '../core/model.js';
import { proposalBindingHash, stepUpChallenge } from '../core/step-up.js';
import type { PasskeyRecord } from './ports.js';

export interface AssertionRecheck {
  /** Step-up approvals whose stored assertion was checked again. */
  checked: number;
  /** The first that does not hold, and why. */
  failed: { auditId: number; seq: number | null; proposalId: string | null; reason: string } | null;
}

export interface RecheckSources {
  passkey(credentialId: string): Promise<PasskeyRecord | null>;
  proposal(id: string): Promise<ProposalRecord | null>;
}

/** A plain Uint8Array over its own ArrayBuffer, which is what the WebAuthn helpers take. */
const decode = (value: string): Uint8Array<ArrayBuffer> => new Uint8Array(Buffer.from(value, 'base64url'));

/** Why this stored proof does not hold, or null when it does. */
export async function recheckProof(proof: PasskeyProof, proposal: ProposalRecord | null, passkey: PasskeyRecord | null): Promise<string | null> {
  if (!proposal) return 'the proposal it approved is missing';
  if (proof.bindingHash !== proposalBindingHash(proposal)) return 'the assertion is bound to other params than the proposal holds';
  let clientData: { type?: unknown; challenge?: unknown };
  try {
    clientData = JSON.parse(Buffer.from(proof.clientDataJSON, 'base64url').toString('utf8')) as typeof clientData;
  } catch {
    return 'the stored client data is not JSON';
  }
  if (clientData.type !== 'webauthn.get') return 'the stored client data is not an assertion';
  if (clientData.challenge !== stepUpChallenge(proof.bindingHash, proof.nonce)) return 'the signed challenge is not the one this proposal and nonce make';
  if (!passkey) return `the passkey ${proof.credentialId} is not in the passkeys table`;
  const clientDataHash = createHash('sha256').update(decode(proof.clientDataJSON)).digest();
  const signed = new Uint8Array(Buffer.concat([decode(proof.authenticatorData), clientDataHash]));
  let valid: boolean;
  try {
    valid = await verifySignature({ signature: decode(proof.signature), data: signed, credentialPublicKey: decode(passkey.publicKey) });
  } catch {
    valid = false;
  }
  return valid ? null : 'the signature does not verify with the stored public key';
}

/**
 * `twokey audit verify`, second half: every `approval.recorded` row that carries a passkey
 * assertion is checked again from what it stored — the challenge is the proposal's binding hash with
 * the nonce, and the signature verifies with the passkey's public key (kept after a revocation).
 */
export async function recheckAssertions(events: AsyncIterable<AuditEventRecord>, sources: RecheckSources): Promise<AssertionRecheck> {
  let checked = 0;
  for await (const event of events) {
    if (event.type !== 'approval.recorded') continue;
    const proof = event.data.stepUp as PasskeyProof | undefined;
    if (!proof) continue;
    checked += 1;
    const proposal = event.proposalId ? await sources.proposal(event.proposalId) : null;
    const reason = await recheckProof(proof, proposal, await sources.passkey(proof.credentialId));
    if (reason) return { checked, failed: { auditId: event.id, seq: event.seq, proposalId: event.proposalId, reason } };
  }
  return { checked, failed: null };
}
