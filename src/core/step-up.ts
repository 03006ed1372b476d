import { createHash } from 'node:crypto';
import { TwokeyError } from './errors.js';
import type { Decider, OperationSpec, PasskeyProof, ProposalRecord } from './model.js';
import { canonicalJson, sha256Hex } from './secrets.js';

/**
 * Step-up: an operation that says `stepUp: passkey` is approved only with a WebAuthn assertion made
 * for that one proposal. The assertion's challenge is derived from the proposal's binding hash and a
 * single-use server nonce, so a signature proves this person approved these exact params, and cannot
 * be carried onto another proposal. The core only checks that the approval carries such a proof for
 * this proposal; verifying the signature is the passkeys module's job (src/passkeys), which builds
 * the proof, and `twokey audit verify` re-checks it later from what the approval stored.
 */

/**
 * The proposal's binding hash: what an approval commits to. Its id (so no other proposal), its agent
 * and operation, and the hashes of its params and summary (so no other arguments).
 */
export function proposalBindingHash(proposal: Pick<ProposalRecord, 'id' | 'agentId' | 'operation' | 'paramsHash' | 'summaryHash'>): string {
  return sha256Hex(
    canonicalJson({
      proposal: proposal.id,
      agent: proposal.agentId,
      operation: proposal.operation,
      params: proposal.paramsHash,
      summary: proposal.summaryHash,
    }),
  );
}

/** The WebAuthn challenge for an approval: base64url(SHA-256(binding hash bytes || nonce bytes)). */
export function stepUpChallenge(bindingHash: string, nonce: string): string {
  return createHash('sha256').update(Buffer.from(bindingHash, 'hex')).update(Buffer.from(nonce, 'base64url')).digest('base64url');
}

/** The operation asks for a passkey, or the policy rule that matched this proposal did. */
export const requiresPasskey = (operation: Pick<OperationSpec, 'stepUp'>, proposal?: Pick<ProposalRecord, 'stepUp'>): boolean =>
  operation.stepUp === 'passkey' || proposal?.stepUp === 'passkey';

/**
 * Refuses an approval of a step-up operation that does not carry a proof made for this proposal.
 * `link` is where the person can approve with their passkey (the console's page of the proposal).
 */
export function checkStepUp(operation: Pick<OperationSpec, 'stepUp'>, proposal: ProposalRecord, decider: Decider, link?: (proposalId: string) => string): void {
  if (!requiresPasskey(operation, proposal)) return;
  const proof = decider.stepUp;
  if (!proof) {
    // The id comes first: chat sets the first mention of it apart, which must not be inside the link.
    // The link is not last, so no sentence's full stop is read as part of it.
    const where = link ? `open ${link(proposal.id)} to approve it there` : 'approve it in the web console';
    throw new TwokeyError('step_up_required', `Proposal ${proposal.id} (“${proposal.operation}”) needs a passkey to approve: ${where} with your passkey.`);
  }
  if (proof.bindingHash !== proposalBindingHash(proposal) || stepUpChallengeOf(proof) === null) {
    throw new TwokeyError('step_up_failed', 'The passkey assertion was not made for this proposal.');
  }
}

/** The challenge the client data carries, or null when it is not the one this proof's binding and nonce make. */
function stepUpChallengeOf(proof: PasskeyProof): string | null {
  try {
    const clientData = JSON.parse(Buffer.from(proof.clientDataJSON, 'base64url').toString('utf8')) as { challenge?: unknown };
    const expected = stepUpChallenge(proof.bindingHash, proof.nonce);
    return clientData.challenge === expected ? expected : null;
  } catch {
    return null;
  }
}
