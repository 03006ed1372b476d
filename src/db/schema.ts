import { sql } from 'drizzle-orm';
import {
  bigserial,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

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
  },
  (table) => [
    uniqueIndex('proposals_token_hash_key').on(table.tokenHash),
    index('proposals_agent_idx').on(table.agentId, table.createdAt),
    index('proposals_status_idx').on(table.status, table.expiresAt),
    check(
      'proposals_status_check',
      sql`${table.status} in ('pending','approved','executing','committed','rejected','expired','cancelled')`,
    ),
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
  },
  (table) => [primaryKey({ columns: [table.proposalId, table.approver] })],
);

export const auditEvents = pgTable(
  'audit_events',
  {
    seq: bigserial('seq', { mode: 'number' }).primaryKey(),
    at: instant('at').notNull(),
    type: text('type').notNull(),
    actor: text('actor').notNull(),
    proposalId: text('proposal_id'),
    agentId: text('agent_id'),
    data: jsonb('data').$type<Record<string, unknown>>().notNull(),
    prevHash: text('prev_hash').notNull(),
    hash: text('hash').notNull(),
  },
  (table) => [index('audit_events_proposal_idx').on(table.proposalId, table.seq)],
);


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

/** Web console sessions; the cookie holds the secret, the table only its hash. */
export const consoleSessions = pgTable(
  'console_sessions',
  {
    idHash: text('id_hash').primaryKey(),
    approver: text('approver').notNull(),
    createdAt: instant('created_at').notNull(),
    expiresAt: instant('expires_at').notNull(),
    revokedAt: instant('revoked_at'),
  },
  (table) => [index('console_sessions_approver_idx').on(table.approver)],
);

export const schema = { agents, proposals, approvals, auditEvents, chatMessages, jobs, agpTokens, idempotencyKeys, approverLinks, consoleSessions };
export type Schema = typeof schema;
