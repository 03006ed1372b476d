import { randomBytesFromPool } from '../lib/random.js';
import { TwokeyError } from '../core/errors.js';
import type { Executed } from '../core/execution.js';
import type { AgentRecord, Clock, ProposalRecord } from '../core/model.js';
import { mintConfirmToken, sha256Hex } from '../core/secrets.js';
import { seal, unseal } from '../idempotency/seal.js';
import type { ExecuteResult } from './adapters/types.js';
import type { BusinessDefinition, BusinessDirectory } from './businesses.js';
import { agpRefusal } from './messages.js';
import {
  GATEWAY_TOKEN_TTL_MS,
  checkAmountCeiling,
  describeExecuteRequest,
  effectivePolicy,
  bindsTheRequest,
  requestHash,
  verifyGatewayToken,
  verifyTokenHolder,
  type ExecuteClaim,
  type GatewayPolicy,
} from './policy.js';
import type { AgpServices, AgpTokenRecord, AgpTokenStore, OpenExecuteRecord } from './ports.js';
import type { AdapterRunner, MintedTokens } from './runner.js';

/**
 * The AGP dialect's rules: discover, query, prepare and execute for one authenticated agent. Knows
 * nothing of HTTP; the routes translate.
 */

export interface AgpServiceDeps {
  businesses: BusinessDirectory;
  runner: AdapterRunner;
  tokens: AgpTokenStore;
  proposals: AgpServices['proposals'];
  policy: GatewayPolicy;
  clock: Clock;
}

export type AgpOperation = 'discover' | 'query' | 'execute';

/** The reference gateway's transaction envelope; the adapter's answer is `data`. */
export interface AgpEnvelope {
  transactionId: string;
  operation: AgpOperation;
  businessId: string;
  status: 'succeeded';
  data: unknown;
  /** The execute had already run under this token: its stored answer, nothing run again. */
  replayed?: true;
}

export interface PrepareResult {
  confirmationToken: string;
  expiresAt: string;
  summary: string;
  businessId: string;
  /** Present when a human must approve: the proposal the agent can follow on GET /v1/proposals/:id. */
  proposalId?: string;
  /** `approved` / `rejected` when a policy rule or a grant decided at once (decidedBy, reason say which). */
  approval?: { status: 'pending' | 'approved' | 'rejected'; quorum: number; decidedBy?: string; reason?: string | null };
}

export interface ExecuteHeaders {
  confirmationToken?: string | undefined;
  idempotencyKey?: string | undefined;
  /**
   * Takes an `open` execute's record to write it with the request's Idempotency-Key outcome, in the
   * same statement, before the answer leaves; false when there is no key (the service writes it).
   */
  recordWithKey?: ((record: OpenExecuteRecord) => boolean) | undefined;
}

const newTransactionId = (): string => `txn_${randomBytesFromPool(12).toString('base64url')}`;
const agentActor = (agent: AgentRecord): string => `agent:${agent.name}`;

/** The core's commit codes, said the AGP way, so both flows answer an agent with the same texts. */
function asAgpRefusal(error: unknown): unknown {
  if (!(error instanceof TwokeyError)) return error;
  switch (error.code) {
    case 'consumed':
      return agpRefusal.consumed();
    case 'expired':
      return agpRefusal.expired();
    case 'rejected':
      return agpRefusal.rejected();
    case 'not_approved':
      return agpRefusal.notApproved();
    case 'invalid_token':
      return agpRefusal.invalidToken();
    case 'principal_mismatch':
      return agpRefusal.otherPrincipal();
    case 'operation_mismatch':
    case 'params_mismatch':
      return agpRefusal.mismatch();
    default:
      return error;
  }
}

const envelope = (transactionId: string, operation: AgpOperation, businessId: string, data: unknown): AgpEnvelope => ({
  transactionId,
  operation,
  businessId,
  status: 'succeeded',
  data,
});

function requireBusiness(businesses: BusinessDirectory, businessId: string): BusinessDefinition {
  const business = businesses.get(businessId);
  if (!business) throw new TwokeyError('not_found', `No business registered with ID '${businessId}'.`);
  return business;
}

/** What `prepare` hands out: a token for this agent, business and request, and the audit row of its issue. */
interface PreparedRequest {
  agent: AgentRecord;
  business: BusinessDefinition;
  request: Record<string, unknown>;
  requestHash: string;
  now: Date;
}

const preparedAudit = (prepared: PreparedRequest, proposalId: string | null) => ({
  type: 'agp.prepared',
  actor: agentActor(prepared.agent),
  agentId: prepared.agent.id,
  proposalId,
  data: { businessId: prepared.business.id, requestHash: prepared.requestHash },
});

/** A business that needs approval: the proposal's own token is the AGP token, so the core checks approval, expiry and single use. */
async function prepareWithApproval(deps: AgpServiceDeps, prepared: PreparedRequest, approvalOperation: string): Promise<PrepareResult> {
  const { agent, business, request } = prepared;
  const businessId = business.id;
  const { proposal, confirmToken } = await deps.proposals.propose(agent, { operation: approvalOperation, params: { businessId, request } });
  try {
    await deps.tokens.insert(
      {
        tokenHash: sha256Hex(confirmToken),
        kind: 'gateway',
        agentId: agent.id,
        businessId,
        requestHash: prepared.requestHash,
        proposalId: proposal.id,
        data: null,
        createdAt: prepared.now,
        expiresAt: proposal.expiresAt,
        consumedAt: null,
      },
      { audit: preparedAudit(prepared, proposal.id) },
    );
  } catch (error) {
    // No approver should be asked about a request the agent can never execute.
    await deps.proposals.cancel(agent, proposal.id).catch(() => undefined);
    throw error;
  }
  return {
    confirmationToken: confirmToken,
    expiresAt: proposal.expiresAt.toISOString(),
    summary: proposal.summary,
    businessId,
    proposalId: proposal.id,
    approval:
      proposal.status === 'pending' || !proposal.decidedBy
        ? { status: 'pending', quorum: proposal.quorum }
        : {
            status: proposal.status === 'rejected' ? 'rejected' : 'approved',
            quorum: proposal.quorum,
            decidedBy: proposal.decidedBy,
            reason: proposal.decisionReason,
          },
  };
}

/** A business without approval: a gateway token of its own, good for `GATEWAY_TOKEN_TTL_MS`. */
async function prepareGatewayToken(deps: AgpServiceDeps, prepared: PreparedRequest): Promise<PrepareResult> {
  const { agent, business, request, now } = prepared;
  const confirmationToken = mintConfirmToken();
  const expiresAt = new Date(now.getTime() + GATEWAY_TOKEN_TTL_MS);
  await deps.tokens.insert(
    {
      tokenHash: sha256Hex(confirmationToken),
      kind: 'gateway',
      agentId: agent.id,
      businessId: business.id,
      requestHash: prepared.requestHash,
      proposalId: null,
      data: null,
      createdAt: now,
      expiresAt,
      consumedAt: null,
    },
    { audit: preparedAudit(prepared, null) },
  );
  return {
    confirmationToken,
    expiresAt: expiresAt.toISOString(),
    summary: describeExecuteRequest(business.id, request, business.amounts),
    businessId: business.id,
  };
}

/**
 * The key the business sees. Under a token it is fixed by the token alone: a failed call releases
 * the token for a retry, and a retry must carry the same key whatever Idempotency-Key header the
 * agent sends, or a business that already acted would act twice for one token. Only `open`, which
 * has no token, uses the agent's header (scoped to the agent: businesses see every agent as one twokey).
 */
function businessIdempotencyKey(agent: AgentRecord, headers: ExecuteHeaders, tokenHash: string | null, transactionId: string): string {
  if (tokenHash) return `agp_${tokenHash.slice(0, 40)}`;
  if (headers.idempotencyKey) return `agp_${sha256Hex(`${agent.id}:${headers.idempotencyKey}`).slice(0, 40)}`;
  return transactionId;
}

/** One execute request as it runs: who asks, for which business, under which transaction, and its audit data. */
interface ExecuteRun {
  agent: AgentRecord;
  business: BusinessDefinition;
  request: Record<string, unknown>;
  transactionId: string;
  auditData: Record<string, unknown>;
}

function runExecute(runner: AdapterRunner, run: ExecuteRun, idempotencyKey: string, minted?: MintedTokens) {
  const { business, agent, request, transactionId } = run;
  return runner.run(
    { business, agentId: agent.id, transactionId },
    (ctx): Promise<ExecuteResult> => business.adapter.execute(request, { idempotencyKey }, ctx),
    minted,
  );
}

/**
 * `open`: no token at all; X-Confirmation-Token is ignored entirely, as the specification says. The
 * audit row and the tokens the adapter minted (the echo shop's order token) are written together, in
 * one statement, before the answer: with the Idempotency-Key's outcome when the request has one.
 */
async function executeOpen(deps: AgpServiceDeps, run: ExecuteRun, headers: ExecuteHeaders): Promise<AgpEnvelope> {
  const { agent, transactionId } = run;
  const minted: MintedTokens = { records: [] };
  const result = await runExecute(deps.runner, run, businessIdempotencyKey(agent, headers, null, transactionId), minted);
  const record: OpenExecuteRecord = {
    event: { type: 'agp.executed', actor: agentActor(agent), agentId: agent.id, data: { ...run.auditData, adapterStatus: result.status } },
    at: deps.clock(),
    minted: minted.records,
  };
  if (!headers.recordWithKey?.(record)) await deps.tokens.recordOpenExecute(record);
  return envelope(transactionId, 'execute', run.business.id, result);
}

/** A token backed by a proposal: the core's commit runs it, and its refusals are said the AGP way. */
async function executeApproved(deps: AgpServiceDeps, run: ExecuteRun, proposalId: string, token: string): Promise<AgpEnvelope> {
  const { agent, business, request } = run;
  const proposal: ProposalRecord = await deps.proposals.get(proposalId);
  if (proposal.status === 'cancelled') throw agpRefusal.cancelled();
  let executed: Executed;
  try {
    // The core checks the rest in the same order (src/core/token-checks.ts): consumed (or this very request again), expired, the request's binding.
    executed = await deps.proposals.commitWithApprovals(agent, proposalId, token, {
      operation: proposal.operation,
      params: { businessId: business.id, request },
    });
  } catch (error) {
    throw asAgpRefusal(error);
  }
  const answer = envelope(executed.proposal.id, 'execute', business.id, executed.proposal.result ?? null);
  return executed.replayed ? { ...answer, replayed: true } : answer;
}

/** What `data.execution` of a gateway token says once its execute has run. */
interface FinishedExecution {
  transactionId: string;
  status: 'done';
  /** The answer, sealed under the token itself (the database holds only its hash), so only its holder can read it back. */
  answer: unknown;
}

function finishedExecution(record: AgpTokenRecord): FinishedExecution | null {
  const execution = record.data?.['execution'];
  if (typeof execution !== 'object' || execution === null) return null;
  const { transactionId, status, answer } = execution as Record<string, unknown>;
  return typeof transactionId === 'string' && status === 'done' && answer !== undefined ? { transactionId, status, answer } : null;
}

/**
 * The same agent sending the same request again with a gateway token its execute already spent
 * (its connection died before the answer came): the stored answer. Anything else about a spent token
 * stays `consumed`.
 */
function replayUnderGatewayToken(record: AgpTokenRecord, claim: ExecuteClaim, token: string): AgpEnvelope | null {
  const execution = record.consumedAt && bindsTheRequest(record, claim) ? finishedExecution(record) : null;
  const answer = execution ? unseal(execution.answer, token, record.tokenHash) : null;
  if (!execution || answer === null) return null;
  return { ...envelope(execution.transactionId, 'execute', record.businessId, JSON.parse(answer) as unknown), replayed: true };
}

/** A gateway token: consumed with the record that this execution started, released again if the business does not answer. */
async function executeUnderGatewayToken(deps: AgpServiceDeps, run: ExecuteRun, token: string, claim: ExecuteClaim, now: Date): Promise<AgpEnvelope> {
  const { agent, transactionId, auditData } = run;
  const { tokens } = deps;
  const tokenHash = sha256Hex(token);
  // Checked again under the row lock.
  await tokens.consume(tokenHash, 'gateway', now, (row) => verifyGatewayToken(row, claim, now), {
    data: { execution: { transactionId, status: 'running', startedAt: now.toISOString() } },
    audit: { type: 'agp.execute.started', actor: agentActor(agent), agentId: agent.id, data: auditData },
  });
  let result: ExecuteResult;
  try {
    result = await runExecute(deps.runner, run, businessIdempotencyKey(agent, {}, tokenHash, transactionId));
  } catch (error) {
    const message = error instanceof TwokeyError ? error.message : 'adapter failed';
    // The business did not answer: the token is released so the agent can retry it (the business
    // sees the same Idempotency-Key), as a failed execution of a proposal goes back to approved.
    await tokens.finish(tokenHash, deps.clock(), {
      release: true,
      data: { execution: { transactionId, status: 'failed', error: message } },
      audit: { type: 'agp.execute.failed', actor: agentActor(agent), agentId: agent.id, data: { ...auditData, error: message } },
    });
    throw error;
  }
  const finishedAt = deps.clock();
  await tokens.finish(tokenHash, finishedAt, {
    release: false,
    data: {
      execution: {
        transactionId,
        status: 'done',
        adapterStatus: result.status,
        finishedAt: finishedAt.toISOString(),
        answer: seal(JSON.stringify(result), token, tokenHash),
      },
    },
    audit: { type: 'agp.executed', actor: agentActor(agent), agentId: agent.id, data: { ...auditData, adapterStatus: result.status } },
  });
  return envelope(transactionId, 'execute', run.business.id, result);
}

export function createAgpService(deps: AgpServiceDeps) {
  const { businesses, runner, tokens, clock } = deps;

  async function discover(agent: AgentRecord, businessId: string): Promise<AgpEnvelope> {
    const business = requireBusiness(businesses, businessId);
    const transactionId = newTransactionId();
    const data = await runner.run({ business, agentId: agent.id, transactionId }, (ctx) => business.adapter.discover(ctx));
    return envelope(transactionId, 'discover', businessId, data);
  }

  async function query(agent: AgentRecord, businessId: string, request: Record<string, unknown>): Promise<AgpEnvelope> {
    const business = requireBusiness(businesses, businessId);
    const transactionId = newTransactionId();
    const data = await runner.run({ business, agentId: agent.id, transactionId }, (ctx) => business.adapter.query(request, ctx));
    return envelope(transactionId, 'query', businessId, data);
  }

  async function prepare(agent: AgentRecord, businessId: string, request: Record<string, unknown>): Promise<PrepareResult> {
    const business = requireBusiness(businesses, businessId);
    // A token `strict` will refuse at execute is not worth a human's attention now.
    if (deps.policy.mode === 'strict') checkAmountCeiling(request, deps.policy.maxAmountCents, business.amounts);
    const prepared: PreparedRequest = { agent, business, request, requestHash: requestHash(request), now: clock() };
    return business.approval ? prepareWithApproval(deps, prepared, business.approval.operation) : prepareGatewayToken(deps, prepared);
  }

  async function execute(agent: AgentRecord, businessId: string, request: Record<string, unknown>, headers: ExecuteHeaders = {}): Promise<AgpEnvelope> {
    const business = requireBusiness(businesses, businessId);
    const policy = effectivePolicy(deps.policy.mode, business.approval !== null);
    const transactionId = newTransactionId();
    const hash = requestHash(request);
    const run: ExecuteRun = { agent, business, request, transactionId, auditData: { businessId, requestHash: hash, transactionId, policy } };
    if (policy === 'open') return executeOpen(deps, run, headers);

    const token = headers.confirmationToken?.trim();
    if (!token) throw agpRefusal.missingToken();
    const claim: ExecuteClaim = { agentId: agent.id, businessId, requestHash: hash };
    const now = clock();
    const record = await tokens.find(sha256Hex(token), 'gateway');
    verifyTokenHolder(record, claim);
    if (record.proposalId) {
      if (policy === 'strict') checkAmountCeiling(request, deps.policy.maxAmountCents, business.amounts);
      return executeApproved(deps, run, record.proposalId, token);
    }
    const replay = replayUnderGatewayToken(record, claim, token);
    if (replay) return replay;
    verifyGatewayToken(record, claim, now);
    if (policy === 'strict') checkAmountCeiling(request, deps.policy.maxAmountCents, business.amounts);
    return executeUnderGatewayToken(deps, run, token, claim, now);
  }

  return { discover, query, prepare, execute, businesses: () => [...businesses.values()] };
}

export type AgpService = ReturnType<typeof createAgpService>;
