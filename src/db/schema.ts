import { sql } from 'drizzle-orm';
import { PROPOSAL_STATUSES } from '../core/model.js';
import { bigint, bigserial, boolean, check, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

import type { PasskeyProof } from '../core/model.js';

const instant = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const agents = pgTable(
  'agents',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    // Only the SHA-256 of the API key is kept; the prefix lets an operator recognise a key.
    keyHash: text('key_hash').notNull(),
    keyPrefix: text('key_prefix').notNull(),
    // Kept in clear because twokey must sign every callback with it.
    callbackSecret: text('callback_secret').notNull(),
    owners: jsonb('owners').$type<string[]>().notNull(),
    // null = every operation of the config file.
    operations: jsonb('operations').$type<string[] | null>(),
    createdAt: instant('created_at').notNull(),
    revokedAt: instant('revoked_at'),
  },
  (table) => [uniqueIndex('agents_name_key').on(table.name), uniqueIndex('agents_key_hash_key').on(table.keyHash)],
);

export const proposals = pgTable(
  'proposals',
  {
    id: text('id').primaryKey(),
    agentId: text('agent_id')
      .notNull()
      .references(() => agents.id),
    operation: text('operation').notNull(),
    params: jsonb('params').$type<Record<string, unknown>>().notNull(),
    paramsHash: text('params_hash').notNull(),
    summary: text('summary').notNull(),
    summaryHash: text('summary_hash').notNull(),
    cost: text('cost'),
    confirmationType: text('confirmation_type').notNull(),
    tokenHash: text('token_hash').notNull(),
    status: text('status').notNull(),
    quorum: integer('quorum').notNull(),
    commitMode: text('commit_mode').notNull(),
    callbackUrl: text('callback_url'),
    createdAt: instant('created_at').notNull(),
    expiresAt: instant('expires_at').notNull(),
    consumedAt: instant('consumed_at'),
    decidedBy: text('decided_by'),
    decidedAt: instant('decided_at'),
    decisionReason: text('decision_reason'),
    result: jsonb('result'),
    error: text('error'),
    executionAttempts: integer('execution_attempts').notNull().default(0),
    leaseUntil: instant('lease_until'),
    updatedAt: instant('updated_at').notNull(),
    // null = the operation's approvers; set by a `require` rule or an escalation.
    approvers: jsonb('approvers').$type<string[] | null>(),
    reminders: integer('reminders').notNull().default(0),
    escalatedAt: instant('escalated_at'),
    // `passkey` when a policy rule asked for it (`decide: require` with `stepUp: passkey`); the operation's own is in the config.
    stepUp: text('step_up').$type<'passkey'>(),
    // The propose span's trace context, for the spans of the decision and execution (src/tracing).
    traceContext: jsonb('trace_context').$type<Record<string, string> | null>(),
  },
  (table) => [
    uniqueIndex('proposals_token_hash_key').on(table.tokenHash),
    index('proposals_agent_idx').on(table.agentId, table.createdAt),
    index('proposals_status_idx').on(table.status, table.expiresAt),
    check('proposals_status_check', sql`${table.status} in (${sql.raw(PROPOSAL_STATUSES.map((status) => `'${status}'`).join(','))})`),
  ],
);

export const approvals = pgTable(
  'approvals',
  {
    proposalId: text('proposal_id')
      .notNull()
      .references(() => proposals.id),
    approver: text('approver').notNull(),
    // The approvers-list entry that allowed this approval (the user itself, or its group or role),
    // so a later config change that removes that entry also removes the approval's weight.
    matchedRule: text('matched_rule').notNull(),
    via: text('via').notNull(),
    at: instant('at').notNull(),
    // A step-up approval's verified passkey assertion (src/core/step-up.ts), kept to be re-checked.
    stepUp: jsonb('step_up').$type<PasskeyProof | null>(),
  },
  (table) => [primaryKey({ columns: [table.proposalId, table.approver] })],
);

/**
 * The audit log. A state change inserts its row (`id`, content) in its own transaction without
 * waiting for anyone; the integrator later gives each committed row its place in the chain (`seq`,
 * `prev_hash`, `hash`) once — the append-only trigger allows exactly that one update.
 */
export const auditEvents = pgTable(
  'audit_events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    seq: bigint('seq', { mode: 'number' }),
    at: instant('at').notNull(),
    type: text('type').notNull(),
    actor: text('actor').notNull(),
    proposalId: text('proposal_id'),
    agentId: text('agent_id'),
    data: jsonb('data').$type<Record<string, unknown>>().notNull(),
    prevHash: text('prev_hash'),
    hash: text('hash'),
  },
  (table) => [
    uniqueIndex('audit_events_seq_key').on(table.seq),
    index('audit_events_proposal_idx').on(table.proposalId, table.id),
    index('audit_events_pending_idx')
      .on(table.id)
      .where(sql`${table.seq} is null`),
  ],
);

/**
 * Signed checkpoints of the chain (size, head hash, the hashes it adds), kept until every sink has
 * them: written in the integrating transaction, published outside the database after commit.
 */
export const auditCheckpoints = pgTable('audit_checkpoints', {
  size: bigint('size', { mode: 'number' }).primaryKey(),
  record: text('record').notNull(),
  publishedTo: text('published_to')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  createdAt: instant('created_at').notNull(),
});

/** Where each proposal's chat message lives, so every later change edits it in place. */
export const chatMessages = pgTable(
  'chat_messages',
  {
    proposalId: text('proposal_id')
      .notNull()
      .references(() => proposals.id),
    platform: text('platform').notNull(),
    channel: text('channel').notNull(),
    messageId: text('message_id').notNull(),
    // The last proposal state rendered into the message; a sync with nothing new writes nothing.
    renderedVersion: text('rendered_version'),
    trailPosted: timestamp('trail_posted', { withTimezone: true, mode: 'date' }),
    createdAt: instant('created_at').notNull(),
  },
  (table) => [primaryKey({ columns: [table.proposalId, table.platform] })],
);

/**
 * The durable outbox: work that must reach the outside (chat posts and edits, callbacks), written in
 * the same transaction as the state change that causes it and run after commit, with retries.
 */
export const jobs = pgTable(
  'jobs',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    kind: text('kind').notNull(),
    payload: jsonb('payload').$type<Record<string, unknown>>().notNull(),
    // Jobs with the same key run one at a time, oldest first (edits of one chat message stay in order).
    orderingKey: text('ordering_key'),
    status: text('status').notNull(),
    attempts: integer('attempts').notNull().default(0),
    maxAttempts: integer('max_attempts').notNull(),
    runAt: instant('run_at').notNull(),
    lockedUntil: instant('locked_until'),
    // The claim that holds a running job (worker id and attempt): every outcome update names it, so
    // a worker whose lease ran out cannot overwrite the work of the worker that re-claimed the job.
    lockedBy: text('locked_by'),
    lastError: text('last_error'),
    createdAt: instant('created_at').notNull(),
    updatedAt: instant('updated_at').notNull(),
  },
  (table) => [
    index('jobs_due_idx').on(table.status, table.runAt),
    index('jobs_ordering_idx').on(table.orderingKey, table.id),
    check('jobs_status_check', sql`${table.status} in ('queued','running','done','dead')`),
  ],
);

/**
 * Callback URLs an agent's receiver retired with `410 Gone` (Standard Webhooks): twokey stops
 * sending to them for that agent.
 */
export const disabledCallbacks = pgTable(
  'disabled_callbacks',
  {
    agentId: text('agent_id')
      .notNull()
      .references(() => agents.id),
    url: text('url').notNull(),
    disabledAt: instant('disabled_at').notNull(),
  },
  (table) => [primaryKey({ columns: [table.agentId, table.url] })],
);

/**
 * AGP confirmation tokens: `gateway` tokens from /agp/execute/prepare, bound to agent, businessId and
 * the SHA-256 of the canonical request; `adapter` tokens minted by a business adapter (echo's order
 * confirmation). Stored hashed; single use.
 */
export const agpTokens = pgTable(
  'agp_tokens',
  {
    tokenHash: text('token_hash').primaryKey(),
    kind: text('kind').notNull(),
    agentId: text('agent_id')
      .notNull()
      .references(() => agents.id),
    businessId: text('business_id').notNull(),
    requestHash: text('request_hash').notNull(),
    // Set when a human must approve before execute (chat approval for AGP).
    proposalId: text('proposal_id').references(() => proposals.id),
    data: jsonb('data').$type<Record<string, unknown>>(),
    createdAt: instant('created_at').notNull(),
    expiresAt: instant('expires_at').notNull(),
    consumedAt: instant('consumed_at'),
  },
  (table) => [check('agp_tokens_kind_check', sql`${table.kind} in ('gateway','adapter')`)],
);

/** Idempotency-Key records per agent (Stripe / IETF draft semantics), kept 24 hours. */
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    agentId: text('agent_id')
      .notNull()
      .references(() => agents.id),
    key: text('key').notNull(),
    requestHash: text('request_hash').notNull(),
    status: text('status').notNull(),
    responseStatus: integer('response_status'),
    responseBody: jsonb('response_body'),
    createdAt: instant('created_at').notNull(),
    expiresAt: instant('expires_at').notNull(),
  },
  (table) => [
    primaryKey({ columns: [table.agentId, table.key] }),
    index('idempotency_keys_expiry_idx').on(table.expiresAt),
    check('idempotency_keys_status_check', sql`${table.status} in ('in_flight','done')`),
  ],
);

/** One-time console sign-in links from `twokey approvers link NAME`, stored hashed. */
export const approverLinks = pgTable('approver_links', {
  tokenHash: text('token_hash').primaryKey(),
  approver: text('approver').notNull(),
  createdAt: instant('created_at').notNull(),
  expiresAt: instant('expires_at').notNull(),
  usedAt: instant('used_at'),
});

/**
 * Emailed decision links (src/email): one per approver per mail, bound to the proposal's binding hash;
 * the mail holds the token, this table only its SHA-256.
 */
export const emailLinks = pgTable(
  'email_links',
  {
    tokenHash: text('token_hash').primaryKey(),
    proposalId: text('proposal_id')
      .notNull()
      .references(() => proposals.id),
    approver: text('approver').notNull(),
    bindingHash: text('binding_hash').notNull(),
    expiresAt: instant('expires_at').notNull(),
    usedAt: instant('used_at'),
    createdAt: instant('created_at').notNull(),
  },
  (table) => [index('email_links_proposal_idx').on(table.proposalId)],
);

/** The approval mail of a proposal to one recipient: its Message-ID, which the outcome replies to. */
export const emailMessages = pgTable(
  'email_messages',
  {
    proposalId: text('proposal_id')
      .notNull()
      .references(() => proposals.id),
    recipient: text('recipient').notNull(),
    messageId: text('message_id').notNull(),
    subject: text('subject').notNull(),
    sentAt: instant('sent_at'),
    outcomeSentAt: instant('outcome_sent_at'),
    createdAt: instant('created_at').notNull(),
  },
  (table) => [primaryKey({ columns: [table.proposalId, table.recipient] })],
);

/** Web console sessions; the cookie holds the secret, the table only its hash. */
export const consoleSessions = pgTable(
  'console_sessions',
  {
    idHash: text('id_hash').primaryKey(),
    approver: text('approver').notNull(),
    /** The issuer's groups claim at sign-in (OpenID Connect sessions); null for a one-time link's session. */
    groups: jsonb('groups').$type<string[]>(),
    createdAt: instant('created_at').notNull(),
    expiresAt: instant('expires_at').notNull(),
    revokedAt: instant('revoked_at'),
  },
  (table) => [index('console_sessions_approver_idx').on(table.approver)],
);

/**
 * Passkeys people registered in the console, keyed to the person (`person:NAME`, or the identity when
 * no person lists it). A revoked passkey keeps its public key: `twokey audit verify` still re-checks
 * the approvals it signed.
 */
export const passkeys = pgTable(
  'passkeys',
  {
    // The credential id the authenticator chose (base64url): unique across every authenticator.
    credentialId: text('credential_id').primaryKey(),
    owner: text('owner').notNull(),
    label: text('label').notNull(),
    // COSE public key, base64url.
    publicKey: text('public_key').notNull(),
    counter: bigint('counter', { mode: 'number' }).notNull(),
    transports: jsonb('transports').$type<string[]>().notNull(),
    createdAt: instant('created_at').notNull(),
    lastUsedAt: instant('last_used_at'),
    revokedAt: instant('revoked_at'),
  },
  (table) => [index('passkeys_owner_idx').on(table.owner)],
);

/**
 * WebAuthn challenges, each used once and for a few minutes: a registration's, or an approval's
 * (bound to the proposal through its binding hash). The nonce is not secret; its single use is.
 */
export const passkeyChallenges = pgTable('passkey_challenges', {
  nonce: text('nonce').primaryKey(),
  owner: text('owner').notNull(),
  purpose: text('purpose').$type<'register' | 'approve'>().notNull(),
  proposalId: text('proposal_id').references(() => proposals.id),
  // The challenge sent to the browser: the nonce itself, or derived from the binding hash and the nonce.
  challenge: text('challenge').notNull(),
  createdAt: instant('created_at').notNull(),
  expiresAt: instant('expires_at').notNull(),
  usedAt: instant('used_at'),
});

/**
 * Standing approvals: "approve the same operation for this agent for 1 h / N uses / within these
 * bounds". Active once `quorum` distinct approvers granted it (grant_approvals); each use is a
 * conditional update of `uses` inside the propose transaction, so concurrent proposals cannot
 * overspend it and a revocation is either before a use or after it.
 */
export const grants = pgTable(
  'grants',
  {
    id: text('id').primaryKey(),
    operation: text('operation').notNull(),
    agentId: text('agent_id')
      .notNull()
      .references(() => agents.id),
    sourceProposalId: text('source_proposal_id').references(() => proposals.id),
    quorum: integer('quorum').notNull(),
    // [] = any params; otherwise each bound must hold ({param, op: 'eq' | 'lte' | 'absent', value}) and no other param be given.
    bounds: jsonb('bounds').$type<Array<{ param: string; op: 'eq' | 'lte' | 'absent'; value: unknown }>>().notNull(),
    maxUses: integer('max_uses'),
    uses: integer('uses').notNull().default(0),
    durationMs: integer('duration_ms').notNull(),
    createdBy: text('created_by').notNull(),
    createdAt: instant('created_at').notNull(),
    expiresAt: instant('expires_at').notNull(),
    activatedAt: instant('activated_at'),
    revokedAt: instant('revoked_at'),
    revokedBy: text('revoked_by'),
  },
  (table) => [
    index('grants_lookup_idx').on(table.agentId, table.operation, table.expiresAt),
    check('grants_uses_check', sql`${table.maxUses} is null or ${table.uses} <= ${table.maxUses}`),
  ],
);

export const grantApprovals = pgTable(
  'grant_approvals',
  {
    grantId: text('grant_id')
      .notNull()
      .references(() => grants.id),
    approver: text('approver').notNull(),
    matchedRule: text('matched_rule').notNull(),
    via: text('via').notNull(),
    at: instant('at').notNull(),
  },
  (table) => [primaryKey({ columns: [table.grantId, table.approver] })],
);

/**
 * One request identity for every way in (src/core/request-identity.ts): a gated call by (agent,
 * operation, canonical params, conversation) maps to the proposal that answers it, so a repeated call
 * gets that proposal, never a second request to a human. The primary key makes the first of two
 * concurrent identical calls the only one that proposes. (It was `mcp_calls` while only MCP used it.)
 */
export const requestIdentities = pgTable(
  'request_identities',
  {
    key: text('key').primaryKey(),
    agentId: text('agent_id')
      .notNull()
      .references(() => agents.id),
    proposalId: text('proposal_id').references(() => proposals.id),
    // While no proposal is recorded, the caller proposing holds the key until this instant.
    claimedUntil: instant('claimed_until').notNull(),
    // The confirmation token, sealed under the creating API key (which the database never holds), so a
    // repeat with that key can commit a `commit: agent` proposal it did not create itself.
    sealedToken: jsonb('sealed_token').$type<Record<string, unknown>>(),
    // When the agent was first answered with the proposal's final outcome: from then on a committed or
    // expired proposal no longer answers the identity, and the next identical call is a new request.
    seenAt: instant('seen_at'),
    updatedAt: instant('updated_at').notNull(),
  },
  (table) => [index('request_identities_proposal_idx').on(table.proposalId)],
);

/**
 * What each agent's MCP client declared at `initialize`. The server is stateless (any replica answers
 * any request), so a later tools/call learns the client's capabilities here.
 */
export const mcpClients = pgTable('mcp_clients', {
  agentId: text('agent_id')
    .primaryKey()
    .references(() => agents.id),
  urlElicitation: boolean('url_elicitation').notNull(),
  updatedAt: instant('updated_at').notNull(),
});

export const schema = {
  grants,
  grantApprovals,
  agents,
  proposals,
  approvals,
  auditEvents,
  auditCheckpoints,
  chatMessages,
  jobs,
  disabledCallbacks,
  agpTokens,
  idempotencyKeys,
  approverLinks,
  emailLinks,
  emailMessages,
  consoleSessions,
  requestIdentities,
  mcpClients,
};
export type Schema = typeof schema;

/**
 * Requests per key per fixed window, shared by every replica. Each replica leases tokens in blocks
 * (src/db/rate-limit-store.ts), so most requests never come here.
 */
export const rateLimitWindows = pgTable(
  'rate_limit_windows',
  {
    key: text('key').notNull(),
    windowStart: bigint('window_start', { mode: 'number' }).notNull(),
    taken: integer('taken').notNull(),
  },
  (table) => [primaryKey({ columns: [table.key, table.windowStart] })],
);

/**
 * What an agent framework needs to resume a paused run once its proposal is decided (an OpenAI
 * Agents `RunState`), kept here so the agent's host can be stateless. Sealed under a key derived
 * from the agent's API key, which the database never holds: it can carry the conversation.
 */
export const resumeStates = pgTable('resume_states', {
  proposalId: text('proposal_id')
    .primaryKey()
    .references(() => proposals.id),
  agentId: text('agent_id')
    .notNull()
    .references(() => agents.id),
  sealed: jsonb('sealed').$type<Record<string, unknown>>().notNull(),
  updatedAt: instant('updated_at').notNull(),
});

/**
 * One row per replica, rewritten by each `/readyz`: readiness proves the database takes a write.
 * A replica's row outlives it by a day at most (every probe deletes rows older than that), so the
 * table stays as small as the fleet; no other statement touches it, so a probe never waits on traffic.
 */
export const readinessProbes = pgTable('readiness_probes', {
  replica: text('replica').primaryKey(),
  probedAt: instant('probed_at').notNull(),
});
