import { z } from 'zod';
import { PROPOSAL_STATUSES } from '../core/model.js';
import { OUTCOME_KINDS } from '../core/outcome.js';
import { apiSchemas, named, type errorBodySchema } from '../http-kit/api-schemas.js';

/**
 * The agent API (`/v1`) and the health routes, as zod schemas: fastify validates requests and
 * filters responses with them (through fastify-type-provider-zod), handlers get their types from
 * them, and `GET /openapi.json` is generated from them. Response objects strip unknown keys, so a
 * field a schema does not list never leaves the server (the confirmation token after `201`).
 *
 * Descriptions and names live in `apiSchemas` (src/http-kit/api-schemas.ts).
 */

export const proposalStatusSchema = z.enum(PROPOSAL_STATUSES);

export const outcomeSchema = named(
  'Outcome',
  z
    .object({
      outcome: z.enum(OUTCOME_KINDS),
      userConsent: z.boolean().register(apiSchemas, { description: 'A human (or a rule a human wrote) said yes to exactly this proposal' }),
      retryable: z.boolean().register(apiSchemas, { description: 'Asking again is the right move: true only while pending and after a failed execution' }),
      reason: z.string().nullable(),
      decidedBy: z.array(z.string()),
      proposalId: z.string(),
    })
    .register(apiSchemas, { description: 'The one answer about a decision; silence is never consent (an undecided proposal ends expired)' }),
);

export const approvalSchema = z.object({ approver: z.string(), at: z.string().register(apiSchemas, { description: 'ISO 8601 time' }) });

export const decisionSchema = z.object({ by: z.string(), at: z.string(), reason: z.string().nullable() });

export const proposalViewSchema = named(
  'ProposalView',
  z
    .object({
      id: z.string(),
      status: proposalStatusSchema,
      operation: z.string(),
      params: z.record(z.string(), z.unknown()),
      summary: z.string().register(apiSchemas, { description: 'Written by twokey from the operation template, never by the agent' }),
      expiresAt: z.string().register(apiSchemas, { description: 'ISO 8601 time; at this instant the token is expired' }),
      quorum: z.int(),
      approvals: z.array(approvalSchema),
      decision: decisionSchema.nullable(),
      result: z.unknown().register(apiSchemas, { description: "The executor's result once committed, else null" }),
      error: z.string().nullable().register(apiSchemas, { description: 'Why the last execution failed' }),
      outcome: outcomeSchema,
    })
    .register(apiSchemas, { description: 'A proposal as its agent sees it; never the confirmation token' }),
);

export const proposalCreatedSchema = named(
  'ProposalCreated',
  z.object({
    id: z.string(),
    status: proposalStatusSchema,
    operation: z.string(),
    summary: z.string(),
    expiresAt: z.string(),
    confirmToken: z.string().register(apiSchemas, { description: 'tk_conf_…, returned this once; needed to commit `commit: agent` operations' }),
    quorum: z.int(),
    approvals: z.tuple([]),
    outcome: outcomeSchema,
  }),
);

export const proposalReusedSchema = named(
  'ProposalReused',
  proposalViewSchema
    .extend({
      confirmToken: z.string().nullable().register(apiSchemas, {
        description: "The request's tk_conf_… token when it was created with this same API key; null otherwise",
      }),
      reused: z.literal(true),
    })
    .register(apiSchemas, { description: 'The open (or not yet seen) request with the same identity, answered instead of a new one (200)' }),
);

export const commitAnswerSchema = named(
  'CommitAnswer',
  z.object({
    status: proposalStatusSchema,
    result: z.unknown(),
    outcome: outcomeSchema,
    replayed: z.literal(true).optional().register(apiSchemas, {
      description:
        'Present when the commit had already happened (the same agent, token, operation and params): the stored result, nothing run again; the header `Idempotent-Replayed: true` says the same',
    }),
  }),
);

export const operationInfoSchema = named(
  'OperationInfo',
  z.object({
    name: z.string(),
    description: z.string(),
    confirmationType: z.enum(['payment', 'approval', 'verification']),
    params: z.record(z.string(), z.unknown()).register(apiSchemas, { description: 'JSON Schema of the params' }),
    quorum: z.int(),
    commit: z.enum(['on_approve', 'agent']),
    expiresInSeconds: z.int(),
  }),
);

export const operationListSchema = z.object({ operations: z.array(operationInfoSchema) });

const operationName = z.string().min(1).max(64);
const paramsObject = z
  .record(z.string(), z.unknown())
  .register(apiSchemas, { description: "Checked against the operation's params schema (400 invalid_params lists every error)" });

export const proposeBodySchema = z.strictObject({
  operation: operationName,
  params: paramsObject,
  callbackUrl: z
    .string()
    .max(2048)
    .regex(/^https?:\/\//)
    .optional()
    .register(apiSchemas, { description: 'Receives the decision and the result, signed (Standard Webhooks)' }),
  reuse: z.boolean().optional().register(apiSchemas, {
    description:
      'true: when this agent already has a request with the same operation, canonical params and conversation that still answers (open, or decided and not yet seen), answer it with 200 instead of asking again',
  }),
  conversation: z
    .string()
    .min(1)
    .max(512)
    .regex(/^\P{Cc}+$/u)
    .optional()
    .register(apiSchemas, {
      description: 'With `reuse`: the conversation, thread or run the call belongs to; the same call in another conversation is another request',
    }),
});

export const commitBodySchema = z.strictObject({ operation: operationName, params: paramsObject });

export const proposalIdParamsSchema = z.object({ id: z.string().min(1).max(64) });

export const proposalQuerySchema = z.strictObject({
  // Query strings are text and types are never coerced: the number is checked by its pattern.
  wait: z
    .string()
    .regex(/^(60|[1-5]?[0-9])(\.[0-9]+)?$/)
    .optional()
    .register(apiSchemas, { description: 'Long-poll: hold the answer up to this many seconds (at most 60) until the proposal changes' }),
  seen: z
    .string()
    .regex(/^[a-z_]{1,20}:[0-9]{1,3}$/)
    .optional()
    .register(apiSchemas, {
      description:
        'With `wait`: what the client last saw, as `<status>:<number of approvals>`. A proposal that differs from it answers at once; one that matches is held until it changes',
    }),
});

const idempotencyKey = z.string().optional().register(apiSchemas, { description: 'A retry with the same key gets the first answer back' });

/** Documented here; the handlers keep checking them (duplicate or absent headers keep their answers). */
export const idempotentHeadersSchema = z.looseObject({ 'idempotency-key': idempotencyKey });

export const commitHeadersSchema = z.looseObject({
  'x-confirmation-token': z.string().optional().register(apiSchemas, { description: 'tk_conf_… from the 201 of POST /v1/proposals' }),
  'idempotency-key': idempotencyKey,
});

/** A paused framework run (an OpenAI Agents RunState) is at most this large. */
export const MAX_RESUME_STATE_CHARS = 1_048_576;

export const resumeStateBodySchema = z.strictObject({
  state: z
    .string()
    .max(MAX_RESUME_STATE_CHARS)
    .register(apiSchemas, { description: 'What the agent needs to resume its run; sealed at rest under its API key' }),
});

export const resumeStateSchema = named('ResumeState', z.object({ state: z.string() }));

export const healthSchema = z.object({ status: z.literal('ok') });
export const readySchema = z.object({ status: z.literal('ready') });
export const notReadySchema = z.object({ status: z.literal('not_ready'), reason: z.string() });

export type ErrorBody = z.output<typeof errorBodySchema>;
export type OutcomeView = z.output<typeof outcomeSchema>;
export type ProposalView = z.output<typeof proposalViewSchema>;
export type ProposalCreated = z.output<typeof proposalCreatedSchema>;
export type ProposalReused = z.output<typeof proposalReusedSchema>;
export type CommitAnswer = z.output<typeof commitAnswerSchema>;
export type OperationInfo = z.output<typeof operationInfoSchema>;
export type ProposeBody = z.output<typeof proposeBodySchema>;
export type CommitBody = z.output<typeof commitBodySchema>;
export type ProposalQuery = z.output<typeof proposalQuerySchema>;
export type ResumeStateBody = z.output<typeof resumeStateBodySchema>;
export type ResumeState = z.output<typeof resumeStateSchema>;
