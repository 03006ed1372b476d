import { consoleAuthFor } from '../console/stores.js';
import { signInUrl } from '../console/urls.js';
import { readCheckpoints } from '../audit/sinks.js';
import { indexCheckpoints, publicKeyFromText } from '../core/audit-chain.js';
import { parseDuration } from '../config/duration.js';
import { TwokeyError } from '../core/errors.js';
import { PERSON_FORMS, parsePersonIdentity } from '../core/identity.js';
import type { ProposalStatus } from '../core/model.js';
import type { JobStatus } from '../db/jobs-store.js';
import type { Services } from '../runtime/services.js';
import { recheckAssertions } from '../passkeys/recheck.js';
import { policyOperations } from './policy-operations.js';

/**
 * What an operator can do, as plain JSON in and out. The CLI runs these in its own process, or, when
 * a server holds the embedded database, asks that server to run them over its admin socket.
 */

const JOB_STATUSES: readonly JobStatus[] = ['queued', 'running', 'done', 'dead'];
const STATUSES: readonly ProposalStatus[] = ['pending', 'approved', 'executing', 'committed', 'rejected', 'expired', 'cancelled'];

function requireString(args: Record<string, unknown>, name: string): string {
  const value = args[name];
  if (typeof value !== 'string' || value.length === 0) throw new TwokeyError('invalid_request', `missing ${name}`);
  return value;
}

function optionalString(args: Record<string, unknown>, name: string): string | undefined {
  const value = args[name];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

function deciderFrom(args: Record<string, unknown>) {
  const identity = requireString(args, 'as');
  if (!parsePersonIdentity(identity)) {
    throw new TwokeyError('invalid_request', `--as must name one person (${PERSON_FORMS}), not "${identity}"`);
  }
  return { identity, via: 'cli' };
}

/**
 * The chain verdict, and the passkey assertions stored with step-up approvals checked again: a
 * broken assertion makes the whole verdict not ok, named by its audit row.
 */
async function withPasskeyRecheck<T extends { ok: boolean }>(services: Services, verdict: T) {
  const passkeys = await recheckAssertions(services.audit.events(), {
    passkey: (id) => services.passkeyStore.get(id),
    proposal: (id) => services.store.getProposal(id),
  });
  if (!passkeys.failed || !verdict.ok) return { ...verdict, passkeyAssertions: passkeys.checked };
  const { seq, proposalId, reason } = passkeys.failed;
  return {
    ...verdict,
    ok: false,
    passkeyAssertions: passkeys.checked,
    seq,
    reason: `the passkey assertion approving ${proposalId ?? 'a proposal'} does not hold: ${reason}`,
  };
}

const stringList = (value: unknown): string[] | undefined =>
  Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : undefined;

export const adminOperations = {
  async 'agents.create'(services: Services, args: Record<string, unknown>) {
    const { agent, apiKey, callbackSecret } = await services.agents.create({
      name: requireString(args, 'name'),
      owners: stringList(args.owners) ?? [],
      operations: stringList(args.operations) ?? null,
    });
    return { id: agent.id, name: agent.name, owners: agent.owners, operations: agent.operations, apiKey, callbackSecret };
  },
  async 'agents.list'(services: Services) {
    return (await services.agents.list()).map((agent) => ({
      id: agent.id,
      name: agent.name,
      keyPrefix: agent.keyPrefix,
      owners: agent.owners,
      operations: agent.operations,
      createdAt: agent.createdAt.toISOString(),
      revokedAt: agent.revokedAt?.toISOString() ?? null,
    }));
  },
  async 'agents.revoke'(services: Services, args: Record<string, unknown>) {
    const agent = await services.agents.revoke(requireString(args, 'name'));
    return { name: agent.name, revokedAt: agent.revokedAt?.toISOString() ?? null };
  },
  async 'proposals.list'(services: Services, args: Record<string, unknown>) {
    const status = optionalString(args, 'status');
    if (status !== undefined && !STATUSES.includes(status as ProposalStatus)) {
      throw new TwokeyError('invalid_request', `--status must be one of ${STATUSES.join(', ')}`);
    }
    const agents = new Map((await services.agents.list()).map((agent) => [agent.id, agent.name]));
    const proposals = await services.store.listProposals(status ? { status: status as ProposalStatus } : {});
    return proposals.map((proposal) => ({
      id: proposal.id,
      status: proposal.status,
      operation: proposal.operation,
      agent: agents.get(proposal.agentId) ?? proposal.agentId,
      summary: proposal.summary,
      createdAt: proposal.createdAt.toISOString(),
      expiresAt: proposal.expiresAt.toISOString(),
      error: proposal.error,
    }));
  },
  async 'proposals.approve'(services: Services, args: Record<string, unknown>) {
    const grantFor = optionalString(args, 'grant');
    let grantId: string | null = null;
    let decided;
    if (grantFor) {
      let durationMs: number;
      try {
        durationMs = parseDuration(grantFor);
      } catch {
        throw new TwokeyError('invalid_request', '--grant must be a duration such as 15m or 1h');
      }
      const uses = optionalString(args, 'uses');
      if (uses !== undefined && !/^\d+$/.test(uses)) throw new TwokeyError('invalid_request', '--uses must be a whole number');
      const granted = await services.grants.approveAndGrant(requireString(args, 'id'), deciderFrom(args), {
        durationMs,
        maxUses: uses === undefined ? null : Number(uses),
        bounded: args.bounded === true,
      });
      grantId = granted.grant.id;
      decided = granted;
    } else {
      decided = await services.proposals.approve(requireString(args, 'id'), deciderFrom(args));
    }
    const { outcome, proposal } = decided;
    const approvals = await services.store.listApprovals(proposal.id);
    return {
      outcome,
      id: proposal.id,
      status: proposal.status,
      approvals: approvals.length,
      quorum: proposal.quorum,
      result: proposal.result ?? null,
      error: proposal.error,
      grantId,
    };
  },
  async 'proposals.reject'(services: Services, args: Record<string, unknown>) {
    const { proposal } = await services.proposals.reject(requireString(args, 'id'), deciderFrom(args), optionalString(args, 'reason'));
    return { id: proposal.id, status: proposal.status, reason: proposal.decisionReason };
  },
  /** An approver's Retry after a failed execution, as the chat button does: same rules, same idempotency key. */
  async 'proposals.retry'(services: Services, args: Record<string, unknown>) {
    const id = requireString(args, 'id');
    const decider = deciderFrom(args);
    try {
      await services.proposals.retry(id, decider);
    } catch (error) {
      // A failed run is an answer, not a crash: the proposal is back to `approved` with the error.
      if (!(error instanceof TwokeyError && error.code === 'execution_failed')) throw error;
    }
    const proposal = await services.proposals.get(id);
    return { id: proposal.id, status: proposal.status, result: proposal.result ?? null, error: proposal.error };
  },
  async 'audit.list'(services: Services, args: Record<string, unknown>) {
    const afterSeq = typeof args.afterSeq === 'number' ? args.afterSeq : 0;
    const events = await services.audit.list({ afterSeq, limit: 500 });
    return events.map((event) => ({ ...event, at: event.at.toISOString() }));
  },
  async 'jobs.list'(services: Services, args: Record<string, unknown>) {
    const status = optionalString(args, 'status');
    if (status !== undefined && !JOB_STATUSES.includes(status as JobStatus)) {
      throw new TwokeyError('invalid_request', `--status must be one of ${JOB_STATUSES.join(', ')}`);
    }
    const rows = await services.jobs.list(status ? { status: status as JobStatus } : {});
    return rows.map((job) => ({
      id: job.id,
      kind: job.kind,
      status: job.status,
      attempts: `${job.attempts}/${job.maxAttempts}`,
      target: job.payload.proposalId ?? null,
      runAt: job.runAt.toISOString(),
      lastError: job.lastError,
    }));
  },
  async 'jobs.retry'(services: Services, args: Record<string, unknown>) {
    const id = Number(requireString(args, 'id'));
    if (!Number.isSafeInteger(id)) throw new TwokeyError('invalid_request', 'job id must be a number');
    const job = await services.jobs.retry(id, services.clock());
    if (!job) throw new TwokeyError('not_found', `no unfinished job ${id}`);
    return { id: job.id, kind: job.kind, status: job.status };
  },
  async 'audit.verify'(services: Services, args: Record<string, unknown>) {
    const path = optionalString(args, 'checkpoints');
    const pending = await services.auditLog.pendingCount();
    if (!path) return withPasskeyRecheck(services, { ...(await services.audit.verify()), pending });
    const keyTexts = stringList(args.publicKeys) ?? [];
    if (keyTexts.length === 0)
      throw new TwokeyError('invalid_request', 'no trusted public key: pass --public-key KEY (from `twokey audit key`) or set TWOKEY_AUDIT_PUBLIC_KEY');
    let keys;
    try {
      keys = keyTexts.map(publicKeyFromText);
    } catch (error) {
      throw new TwokeyError('invalid_request', `--public-key: ${(error as Error).message}`);
    }
    let checkpoints;
    try {
      checkpoints = await readCheckpoints(path);
    } catch (error) {
      throw new TwokeyError('invalid_request', `--checkpoints: ${(error as Error).message}`);
    }
    return withPasskeyRecheck(services, { ...(await services.audit.verify(indexCheckpoints(checkpoints, keys))), pending });
  },
  async 'approvers.link'(services: Services, args: Record<string, unknown>) {
    // The CLI sends the base URL from its own environment (TWOKEY_PUBLIC_URL or HOST:PORT).
    const baseUrl = optionalString(args, 'baseUrl') ?? 'http://127.0.0.1:8080';
    if (!/^https?:\/\//.test(baseUrl)) throw new TwokeyError('invalid_request', 'baseUrl must be an http:// or https:// URL');
    const { approver, token, expiresAt } = await consoleAuthFor(services).mintLink(requireString(args, 'name'));
    const decides = services
      .operations()
      .filter((operation) => operation.approval.approvers.includes(approver))
      .map((operation) => operation.name);
    return { approver, url: signInUrl(baseUrl, token), expiresAt: expiresAt.toISOString(), decides };
  },
  async 'approvers.revoke-sessions'(services: Services, args: Record<string, unknown>) {
    return consoleAuthFor(services).revokeSessions(requireString(args, 'name'));
  },
  ...policyOperations,
} satisfies Record<string, (services: Services, args: Record<string, unknown>) => Promise<unknown>>;

export type AdminOperationName = keyof typeof adminOperations;

export function isAdminOperation(name: string): name is AdminOperationName {
  return Object.hasOwn(adminOperations, name);
}

export function runAdminOperation(services: Services, name: string, args: Record<string, unknown>): Promise<unknown> {
  if (!isAdminOperation(name)) throw new TwokeyError('invalid_request', `unknown admin operation "${name}"`);
  return adminOperations[name](services, args);
}
