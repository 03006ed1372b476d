import { createHash, randomBytes } from 'node:crypto';
import type * as WebAuthn from '@simplewebauthn/server';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import { TwokeyError } from '../core/errors.js';
import type { Clock, ProposalRecord } from '../core/model.js';
import type { People } from '../core/people.js';
import type { PasskeyProof } from '../core/model.js';
import { proposalBindingHash, stepUpChallenge } from '../core/step-up.js';
import type { ChallengePurpose, PasskeyChallengeRecord, PasskeyRecord, PasskeyStore } from './ports.js';

/** How long a browser has between asking for a challenge and answering it. */
export const CHALLENGE_TTL_MS = 5 * 60_000;
const MAX_LABEL_LENGTH = 64;

let webAuthnLibrary: Promise<typeof WebAuthn> | undefined;
/**
 * The WebAuthn library (with its ASN.1 and COSE parsers, a few hundred modules), loaded at the first
 * ceremony rather than at start: a server whose people never use a passkey never needs it.
 */
const webAuthn = () => (webAuthnLibrary ??= import('@simplewebauthn/server'));

/** Who the passkeys are for: the console's origin as people reach it, and its host name as the RP ID. */
export interface RelyingParty {
  origin: string;
  id: string;
  name: string;
}

export interface PasskeyServiceDeps {
  store: PasskeyStore;
  clock: Clock;
  people: People;
}

const refuse = (message: string): never => {
  throw new TwokeyError('step_up_failed', message);
};

const sha256Hex = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** What a person sees of a passkey: never the public key bytes. */
export type PasskeyView = Pick<PasskeyRecord, 'credentialId' | 'label' | 'transports' | 'createdAt' | 'lastUsedAt' | 'revokedAt'>;

/** The new credential of a registration, once its answer verified (origin, RP ID, user verification). */
async function verifiedCredential(response: RegistrationResponseJSON, expectedChallenge: string, rp: RelyingParty) {
  let verified;
  try {
    verified = await (
      await webAuthn()
    ).verifyRegistrationResponse({ response, expectedChallenge, expectedOrigin: rp.origin, expectedRPID: rp.id, requireUserVerification: true });
  } catch (error) {
    return refuse(`The passkey could not be registered: ${(error as Error).message}`);
  }
  if (!verified.verified) return refuse('The passkey could not be registered: the browser’s answer did not verify.');
  return verified.registrationInfo.credential;
}

/** The assertion's new counter, once it verified: challenge, origin, RP ID, user verification, signature, counter. */
async function verifiedCounter(response: AuthenticationResponseJSON, expectedChallenge: string, rp: RelyingParty, passkey: PasskeyRecord): Promise<number> {
  let verified;
  try {
    verified = await (
      await webAuthn()
    ).verifyAuthenticationResponse({
      response,
      expectedChallenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.id,
      requireUserVerification: true,
      credential: {
        id: passkey.credentialId,
        publicKey: Buffer.from(passkey.publicKey, 'base64url'),
        counter: passkey.counter,
        transports: passkey.transports,
      },
    });
  } catch (error) {
    return refuse(`The passkey assertion did not verify: ${(error as Error).message}`);
  }
  if (!verified.verified) return refuse('The passkey assertion did not verify.');
  return verified.authenticationInfo.newCounter;
}

const viewOf = ({ credentialId, label, transports, createdAt, lastUsedAt, revokedAt }: PasskeyRecord): PasskeyView => ({
  credentialId,
  label,
  transports,
  createdAt,
  lastUsedAt,
  revokedAt,
});

/** The proof kept with the approval: the signed bytes as they were, to be verified again later. */
function proofOf(response: AuthenticationResponseJSON, facts: Pick<PasskeyProof, 'credentialId' | 'nonce' | 'bindingHash' | 'counter'>): PasskeyProof {
  const { authenticatorData, clientDataJSON, signature } = response.response;
  return {
    kind: 'passkey',
    ...facts,
    authenticatorData,
    clientDataJSON,
    signature,
    authenticatorDataHash: sha256Hex(Buffer.from(authenticatorData, 'base64url')),
    clientDataHash: sha256Hex(Buffer.from(clientDataJSON, 'base64url')),
  };
}

/**
 * Passkeys of the console's people: registering, listing and revoking them, and the step-up of an
 * approval — a challenge bound to one proposal, then the assertion verified (origin, RP ID, user
 * verification, signature, counter) into the proof the core stores with the approval. Every
 * refusal names its reason and changes nothing but the challenge it spent.
 */
export function createPasskeyService(deps: PasskeyServiceDeps) {
  const { store, clock, people } = deps;
  const ownerOf = (identity: string): string => people.personOf(identity);

  async function issueChallenge(owner: string, purpose: ChallengePurpose, challengeOf: (nonce: string) => string, proposalId: string | null) {
    const now = clock();
    const nonce = randomBytes(32).toString('base64url');
    const challenge = challengeOf(nonce);
    await store.transaction((tx) =>
      tx.insertChallenge({ nonce, owner, purpose, proposalId, challenge, createdAt: now, expiresAt: new Date(now.getTime() + CHALLENGE_TTL_MS) }),
    );
    return { nonce, challenge };
  }

  /** The challenge row as it must be to answer it: this owner's, this purpose, unused and unexpired. */
  async function liveChallenge(nonce: string, owner: string, purpose: ChallengePurpose): Promise<PasskeyChallengeRecord> {
    const row = nonce ? await store.getChallenge(nonce) : null;
    if (!row || row.owner !== owner || row.purpose !== purpose) return refuse('The passkey challenge is unknown: ask for a new one and try again.');
    if (row.usedAt) return refuse('The passkey challenge was already used: each one works once. Try again.');
    if (row.expiresAt.getTime() <= clock().getTime()) return refuse('The passkey challenge expired: try again.');
    return row;
  }

  async function activePasskeys(owner: string): Promise<PasskeyRecord[]> {
    return (await store.listOf(owner)).filter((passkey) => passkey.revokedAt === null);
  }

  return {
    ownerOf,

    async list(identity: string): Promise<PasskeyView[]> {
      return (await store.listOf(ownerOf(identity))).map(viewOf);
    },

    async hasPasskey(identity: string): Promise<boolean> {
      return (await activePasskeys(ownerOf(identity))).length > 0;
    },

    /** Options for `navigator.credentials.create`; the challenge is the nonce itself. */
    async registrationOptions(identity: string, rp: RelyingParty) {
      const owner = ownerOf(identity);
      const { nonce } = await issueChallenge(owner, 'register', (fresh) => fresh, null);
      const options = await (
        await webAuthn()
      ).generateRegistrationOptions({
        rpName: rp.name,
        rpID: rp.id,
        userName: identity,
        userDisplayName: people.nameOf(identity) ?? identity,
        // A stable user handle per person, so a second passkey on the same authenticator replaces nothing.
        userID: createHash('sha256').update(owner).digest(),
        challenge: Buffer.from(nonce, 'base64url'),
        attestationType: 'none',
        excludeCredentials: (await activePasskeys(owner)).map((passkey) => ({ id: passkey.credentialId, transports: passkey.transports })),
        authenticatorSelection: { residentKey: 'preferred', userVerification: 'required' },
      });
      return { nonce, options };
    },

    async register(identity: string, rp: RelyingParty, input: { nonce: string; response: RegistrationResponseJSON; label: string }): Promise<PasskeyView> {
      const owner = ownerOf(identity);
      const challenge = await liveChallenge(input.nonce, owner, 'register');
      const label = input.label.trim().slice(0, MAX_LABEL_LENGTH) || 'passkey';
      const credential = await verifiedCredential(input.response, challenge.challenge, rp);
      const now = clock();
      return store.transaction(async (tx) => {
        if (!(await tx.useChallenge(input.nonce, owner, 'register', now))) refuse('The passkey challenge was already used: each one works once. Try again.');
        const row = {
          credentialId: credential.id,
          owner,
          label,
          publicKey: Buffer.from(credential.publicKey).toString('base64url'),
          counter: credential.counter,
          transports: credential.transports ?? [],
          createdAt: now,
        };
        if (!(await tx.insertPasskey(row))) refuse('This passkey is already registered.');
        await tx.appendAudit(
          { type: 'passkey.registered', actor: identity, data: { owner, credentialId: row.credentialId, label, transports: row.transports } },
          now,
        );
        return { credentialId: row.credentialId, label, transports: row.transports, createdAt: now, lastUsedAt: null, revokedAt: null };
      });
    },

    async revoke(identity: string, credentialId: string): Promise<void> {
      const owner = ownerOf(identity);
      const now = clock();
      await store.transaction(async (tx) => {
        const revoked = await tx.revoke(credentialId, owner, now);
        if (!revoked) throw new TwokeyError('not_found', 'You have no such passkey, or it is already revoked.');
        await tx.appendAudit({ type: 'passkey.revoked', actor: identity, data: { owner, credentialId, label: revoked.label } }, now);
      });
    },

    /**
     * Options for `navigator.credentials.get` to approve this proposal: the challenge is
     * SHA-256(binding hash || nonce), so the signature covers these exact params and no other proposal.
     */
    async approvalOptions(identity: string, proposal: ProposalRecord, rp: RelyingParty) {
      const owner = ownerOf(identity);
      const allowed = await activePasskeys(owner);
      if (allowed.length === 0) refuse('You have no passkey yet: register one on the Passkeys page, then approve.');
      const bindingHash = proposalBindingHash(proposal);
      const { nonce, challenge } = await issueChallenge(owner, 'approve', (fresh) => stepUpChallenge(bindingHash, fresh), proposal.id);
      const options = await (
        await webAuthn()
      ).generateAuthenticationOptions({
        rpID: rp.id,
        challenge: Buffer.from(challenge, 'base64url'),
        userVerification: 'required',
        allowCredentials: allowed.map((passkey) => ({ id: passkey.credentialId, transports: passkey.transports })),
      });
      return { nonce, options };
    },

    /**
     * Verifies an assertion made for this proposal and spends its challenge; the counter moves
     * forward in the same transaction. Returns the proof the core records with the approval.
     */
    async verifyApproval(
      identity: string,
      proposal: ProposalRecord,
      rp: RelyingParty,
      input: { nonce: string; response: AuthenticationResponseJSON },
    ): Promise<PasskeyProof> {
      const owner = ownerOf(identity);
      const row = await liveChallenge(input.nonce, owner, 'approve');
      const bindingHash = proposalBindingHash(proposal);
      const expectedChallenge = stepUpChallenge(bindingHash, input.nonce);
      if (row.proposalId !== proposal.id || row.challenge !== expectedChallenge) refuse('The passkey assertion was made for another proposal.');
      const passkey = await store.get(input.response.id);
      if (!passkey || passkey.owner !== owner) return refuse('The passkey used is not one of yours registered here.');
      if (passkey.revokedAt) return refuse('The passkey used has been revoked.');
      const counter = await verifiedCounter(input.response, expectedChallenge, rp, passkey);
      const now = clock();
      await store.transaction(async (tx) => {
        if (!(await tx.useChallenge(input.nonce, owner, 'approve', now))) refuse('The passkey challenge was already used: each one works once. Try again.');
        if (!(await tx.recordUse(passkey.credentialId, counter, now)))
          refuse('The passkey’s counter went backwards: it may have been cloned. Nothing was approved.');
        await tx.appendAudit(
          { type: 'passkey.asserted', actor: identity, proposalId: proposal.id, data: { owner, credentialId: passkey.credentialId, counter } },
          now,
        );
      });
      return proofOf(input.response, { credentialId: passkey.credentialId, nonce: input.nonce, bindingHash, counter });
    },
  };
}

export type PasskeyService = ReturnType<typeof createPasskeyService>;
