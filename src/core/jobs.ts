import { z } from 'zod';
import type { ChatPlatformJobs, ChatPlatformName } from './chat-platform.js';
import { FINAL_STATUSES, type AgentRecord, type ApprovalRecord, type ProposalRecord } from './model.js';

/**
 * The job catalogue: every kind of outbox job twokey queues, with the schema of its payload. The
 * kinds are the strings stored in `jobs.kind`, so a row written by an earlier version still runs;
 * a payload is checked once, by the outbox worker, before its handler sees it (a stored payload
 * that does not fit is buried, never run). What queues each kind and which lane runs it:
 * src/outbox/README.md, "The job catalogue".
 */

export type { ChatPlatformName } from './chat-platform.js';

const proposalId = z.string().min(1);

/** A reminder or an escalation, as it is posted next to the proposal's message. */
export const followUpKinds = ['remind', 'escalate'] as const;
export type FollowUpKind = (typeof followUpKinds)[number];

/**
 * "Approve for…": the duration, uses and bounds the approver chose, one shape for every platform's
 * stored click (src/outbox/inbox.ts).
 */
export const grantChoice = z.object({ durationMs: z.number().int().positive(), maxUses: z.number().int().positive().nullable(), bounded: z.boolean() });

/**
 * The core's job kinds and their payloads; `platformNames` are the chat platforms a job may name.
 * The full catalogue adds each platform's stored clicks (`src/platforms/jobs.ts`).
 */
export function coreJobSchemas(platformNames: readonly [ChatPlatformName, ...ChatPlatformName[]]) {
  const platform = z.enum(platformNames);
  return {
    /** Posts the proposal's message on a platform, or edits it to the proposal's state when it runs. */
    'chat.sync': z.object({ proposalId, platform }),
    /** POSTs the proposal's final state to the agent's `callbackUrl`. */
    'callback.deliver': z.object({
      proposalId,
      status: z.enum(FINAL_STATUSES),
      // The callbacks lane's caps: at most so many of one agent's callbacks at once, and fewer
      // towards one host. Rows queued before the per-agent cap existed have no `agentId`.
      agentId: z.string().min(1).optional(),
      /** `<agent id> <host:port>`: an agent's hanging receiver holds back its own callbacks only. */
      destination: z.string().min(1),
    }),
    /** The `index`-th reminder of a proposal that waits (counted from 0). */
    'proposal.remind': z.object({ proposalId, index: z.number().int().nonnegative().default(0) }),
    /** The escalation of a proposal that still waits. */
    'proposal.escalate': z.object({ proposalId }),
    /** A reminder or escalation posted next to the proposal's message, after its edit. */
    'chat.followup': z.object({
      proposalId,
      platform,
      kind: z.enum(followUpKinds),
      /** The identities pinged. */
      mention: z.array(z.string()),
      /** Where an escalation is also posted; null: next to the message only. */
      channel: z.string().nullable(),
    }),
  };
}

/** Every job kind, by its stored name, and what its payload holds: the core's and the platforms' clicks. */
export type JobPayloadSchemas = ReturnType<typeof coreJobSchemas> & ChatPlatformJobs;

type Schemas = JobPayloadSchemas;
export type JobKind = keyof Schemas;

/** Kind → payload as a handler receives it (parsed, defaults applied). */
export type JobPayloads = { [K in JobKind]: z.output<Schemas[K]> };
/** Kind → payload as it may be queued (before defaults). */
export type JobPayloadInputs = { [K in JobKind]: z.input<Schemas[K]> };

/** A job of one kind with its payload: `{ kind: 'chat.sync', payload: { proposalId, platform } } | …`. */
export type JobOf<Payloads extends Record<JobKind, unknown>> = { [K in JobKind]: { kind: K; payload: Payloads[K] } }[JobKind];

/** A proposal with what its chat message shows besides it, as its change left them. */
export interface ProposalSnapshot {
  proposal: ProposalRecord;
  agent: AgentRecord;
  approvals: readonly ApprovalRecord[];
}

/**
 * Kind → what a job of that kind would read first, when the transaction that queued it knows it
 * already (a new proposal's first post). Handed over in memory only, to a job taken as it was
 * queued (`OutboxJobOptions.firstOfItsKey`); a kind not named here is never handed one.
 */
export interface JobKnownStates {
  'chat.sync': ProposalSnapshot;
}

export type JobKnownState<K extends JobKind> = K extends keyof JobKnownStates ? JobKnownStates[K] : never;

/** What a handler is told besides its payload. */
export interface JobContext<K extends JobKind = JobKind> {
  /** Aborted when the job's deadline passes: stop waiting on the outside world. */
  signal: AbortSignal;
  /** 1 on the first run; more when an earlier run failed, or its worker died before recording it. */
  attempt: number;
  jobId: number;
  /** The claim the job runs under (the worker always gives it): a decision may complete the job in its own transaction. */
  claim?: JobClaim;
  /**
   * What the job would read first, as the transaction that queued it left it: given only to the
   * first run of a job this process took as it was queued, never to a retry or a claimed job.
   */
  known?: JobKnownState<K>;
}

/** The claim a running job holds, as its completion names it. */
export interface JobClaim {
  id: number;
  lockedBy: string | null;
}

/** A completion's answer: whether the claim still held, and whether a job of its ordering key waits behind it. */
export interface JobCompletion {
  held: boolean;
  followed: boolean;
}

/**
 * A handler's last write, prepared by a store and not sent yet (src/db). The outbox sends it in one
 * statement with the job's completion: one round trip where there were two. Being what the handler
 * returns, nothing of the handler runs after it, so nothing can fail once it is written. Only a
 * write that may land twice fits (an insert that ignores a conflict, an update to a value): while
 * the database cannot be reached, the statement is sent again.
 */
export interface LastWrite {
  /** The write and the completion of `job`, in one statement. */
  completing(job: JobClaim, now: Date): Promise<JobCompletion>;
  /** The write alone, for a caller outside the outbox. */
  send(): Promise<void>;
}

/**
 * The last write of a job whose completion is written already, by a state change's own transaction
 * (`StoreTransaction.completeJob`, a click's decision): its answer is that completion's, and nothing
 * is left to send. No completion (a decision that completed nothing): no last write, and the worker
 * completes the job itself.
 */
export function completedBy(completion: JobCompletion | undefined): LastWrite | undefined {
  return completion && { completing: async () => completion, send: async () => {} };
}

/** Runs a job; what it returns is its last write, sent with its completion (none: the completion alone). */
export type JobHandler<K extends JobKind = JobKind> = (payload: JobPayloads[K], context: JobContext<K>) => Promise<LastWrite | void>;

/** A handler for every kind: a handler whose payload type is not its kind's is a type error. */
export type JobHandlers = { [K in JobKind]: JobHandler<K> };

export type ParsedJob = JobOf<JobPayloads>;

/** The job catalogue's checks, over the full set of schemas (`src/platforms/jobs.ts` builds it). */
export interface JobCatalogue {
  readonly schemas: JobPayloadSchemas;
  isJobKind(kind: string): kind is JobKind;
  /** A stored payload checked against its kind's schema; `problem` names what does not fit (never a value). */
  parseJob(kind: JobKind, payload: unknown): { job: ParsedJob } | { problem: string };
}

export function jobCatalogue(schemas: JobPayloadSchemas): JobCatalogue {
  return {
    schemas,
    isJobKind: (kind: string): kind is JobKind => Object.hasOwn(schemas, kind),
    parseJob(kind, payload) {
      const parsed = (schemas[kind] as z.ZodType).safeParse(payload);
      if (parsed.success) return { job: { kind, payload: parsed.data } as ParsedJob };
      const problems = parsed.error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : 'payload'}: ${issue.message}`);
      return { problem: `the stored payload of a ${kind} job does not fit its schema (${problems.join('; ')})` };
    },
  };
}

/** The handler of a parsed job, bound to its payload; undefined when none is registered for its kind. */
export function boundHandler(handlers: Partial<JobHandlers>, job: ParsedJob): ((context: JobContext) => Promise<LastWrite | void>) | undefined {
  // Sound: `parseJob` paired the payload with its own kind's schema, a pairing TypeScript does not
  // follow through the union of kinds.
  const handler = handlers[job.kind] as ((payload: ParsedJob['payload'], context: JobContext) => Promise<LastWrite | void>) | undefined;
  return handler && ((context) => handler(job.payload, context));
}
