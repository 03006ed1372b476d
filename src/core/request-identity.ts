import { setTimeout as sleep } from 'node:timers/promises';
import { TwokeyError } from './errors.js';
import type { AgentRecord, Clock, ProposalRecord } from './model.js';
import { finalStatuses } from './model.js';
import type { RequestIdentityStore } from './ports.js';
import type { ProposalService, ProposeInput } from './proposals.js';
import { paramsHash, sha256Hex } from './secrets.js';

/**
 * One request identity for every way in (`POST /v1/proposals` with `reuse`, AGP prepare under
 * approval, MCP `tools/call`, and through them every framework adapter): a gated call is identified by
 * its agent, its operation, its canonical params (RFC 8785, as the token binds them) and, where the
 * caller has one, its conversation. A call with the identity of a request that still answers it gets
 * that request back, never a second request to a human.
 *
 * Which proposal still answers its identity (the one rule, kept in SQL in
 * src/db/request-identity-store.ts, so two replicas agree):
 * - `pending`, `executing`: always (a repeat is the same ask).
 * - `approved` (also a failed execution, which stays approved): until its expiry; after it the
 *   approval can no longer be used, and a new call is a new ask.
 * - `committed` by twokey (`commit: on_approve`): until the agent has been answered with the
 *   committed outcome. A repeat that races the approval ("call again with the same arguments") gets
 *   the result; the call after that is a new request, never a replayed "done". A `commit: agent`
 *   proposal was committed by its agent, which read the answer then: it never answers again.
 * - `rejected`: until the agent has been answered with the denial, and in any case until the
 *   proposal's expiry, so a model that ignores "do not retry" cannot re-ask at once.
 * - `expired`: until the agent has been answered with the expiry (the call told to call again learns
 *   that nobody decided, instead of silently opening another ask); then a new call is a new ask.
 * - `cancelled`: never; the agent withdrew it.
 */

/** How long a caller may hold an identity while proposing, before another caller may take it over. */
const CLAIM_MS = 15_000;
const CLAIM_POLL_MS = 25;

/**
 * Seals a confirmation token under the caller's API key (which the database never holds), so a repeat
 * with the same key can have it back, and nothing else can. Built per request by the transport.
 */
export interface TokenSealer {
  seal(token: string, scope: string): Record<string, unknown>;
  /** The token, or null when it cannot be opened with this caller's key. */
  unseal(sealed: unknown, scope: string): string | null;
}

export interface SameRequest {
  /** The framework's conversation or thread: calls in different conversations are different requests. */
  conversation?: string | null;
  /** Without it no token is kept, and a repeat gets the proposal without one. */
  sealer?: TokenSealer;
}

export type ProposedOnce =
  | { created: true; proposal: ProposalRecord; confirmToken: string }
  /** The request that already answers this identity; its token when the caller's key can open it. */
  | { created: false; proposalId: string; confirmToken: string | null };

export interface RequestIdentityDeps {
  proposals: Pick<ProposalService, 'propose'>;
  store: RequestIdentityStore;
  clock: Clock;
}

/**
 * The identity's key. The first three fields hold no newline (an id, an operation name, a hex digest),
 * so appending the conversation after one cannot make two identities collide; without a conversation
 * the key is what MCP calls were keyed by before it had one.
 */
export function requestIdentityKey(agentId: string, operation: string, params: unknown, conversation?: string | null): string {
  const base = `${agentId}\n${operation}\n${paramsHash(params)}`;
  return sha256Hex(conversation ? `${base}\n${conversation}` : base);
}

const sealScope = (agentId: string, key: string) => `request-identity:${agentId}:${key}`;

export function createRequestIdentity(deps: RequestIdentityDeps) {
  const { store, clock } = deps;

  /**
   * The proposal that answers this call: the one that still answers its identity, else a new one. The
   * identity's row is claimed in one statement, so of two identical calls racing on any replicas only
   * one proposes; the other waits for its proposal id.
   */
  async function proposeOnce(agent: AgentRecord, input: ProposeInput, same: SameRequest = {}): Promise<ProposedOnce> {
    const key = requestIdentityKey(agent.id, input.operation, input.params, same.conversation);
    const scope = sealScope(agent.id, key);
    const giveUpAt = Date.now() + CLAIM_MS * 2;
    for (;;) {
      const claim = await store.claim(key, agent.id, clock(), CLAIM_MS);
      if (claim.claimed) {
        try {
          const { proposal, confirmToken } = await deps.proposals.propose(agent, input);
          const sealed = same.sealer ? same.sealer.seal(confirmToken, scope) : null;
          // Decided and final already (a policy rule, a grant): the caller is answered with it now.
          const seen = finalStatuses.includes(proposal.status);
          await store.record(key, { proposalId: proposal.id, sealedToken: sealed, seen }, clock());
          return { created: true, proposal, confirmToken };
        } catch (error) {
          await store.release(key).catch(() => undefined);
          throw error;
        }
      }
      if (claim.proposalId) {
        const confirmToken = claim.sealedToken && same.sealer ? same.sealer.unseal(claim.sealedToken, scope) : null;
        return { created: false, proposalId: claim.proposalId, confirmToken };
      }
      if (Date.now() > giveUpAt) throw new TwokeyError('conflict', 'an identical request is still being proposed; call again');
      await sleep(CLAIM_POLL_MS);
    }
  }

  return { proposeOnce };
}

export type RequestIdentity = ReturnType<typeof createRequestIdentity>;
