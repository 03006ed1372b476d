/**
 * The operations the suites configure, as YAML: one builder per operation, each suite naming only
 * what its tests depend on (approvers, grants, rules, follow-ups), so a change to the config
 * format is made here once rather than in every suite's copy.
 */

/** A value written in YAML flow style; strings are quoted the JSON way, which YAML reads alike. */
type FlowValue = string | number | boolean | readonly FlowValue[] | { readonly [key: string]: FlowValue | undefined };

function flow(value: FlowValue): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return `[${value.map(flow).join(', ')}]`;
  const entries = Object.entries(value).filter((entry): entry is [string, FlowValue] => entry[1] !== undefined);
  return `{ ${entries.map(([key, item]) => `${key}: ${flow(item)}`).join(', ')} }`;
}

/** A policy rule as the config writes it; anything else a test needs to try is passed through. */
export interface PolicyRule {
  readonly when: string;
  readonly decide: string;
  readonly reason?: string;
  readonly quorum?: number;
  readonly [key: string]: FlowValue | undefined;
}

export interface Escalation {
  after: string;
  approvers: readonly string[];
  /** A channel of its own; without one, the escalation goes to the operation's channel. */
  slack?: string;
  discord?: string;
}

export interface OperationOptions {
  approvers: readonly string[];
  quorum?: number;
  /** The Slack or Discord channel the operation's messages go to. */
  slack?: string;
  discord?: string;
  remind?: readonly string[];
  escalate?: Escalation;
  description?: string;
  confirmationType?: 'payment' | 'approval' | 'verification';
  summary?: string;
  cost?: string;
  expiresIn?: string;
  policy?: readonly PolicyRule[];
  /** `approval.approverRule`: who among the approvers may approve a given proposal. */
  approverRule?: { when: string; reason?: string };
  /** Lets approvers approve for a while; `durations` are the choices they are offered. */
  grants?: { maxDuration: string; durations?: readonly string[] };
  commit?: 'on_approve' | 'agent';
  /** An executor's YAML; `{ type: echo }` when not given. */
  executor?: string;
}

interface OperationShape {
  name: string;
  description: string;
  required: readonly string[];
  /** Each param's schema, in flow style. */
  properties: Readonly<Record<string, string>>;
  summary: string;
}

const STRING = '{ type: string }';
const INTEGER = '{ type: integer }';

/** One entry of `operations:`, indented for `configYaml`. */
function operationYaml(shape: OperationShape, options: OperationOptions): string {
  const lines = [`  - name: ${shape.name}`, `    description: ${JSON.stringify(options.description ?? shape.description)}`];
  if (options.confirmationType) lines.push(`    confirmationType: ${options.confirmationType}`);
  lines.push('    params:', '      type: object', `      required: ${flow(shape.required)}`, '      properties:');
  for (const [name, schema] of Object.entries(shape.properties)) lines.push(`        ${name}: ${schema}`);
  lines.push(`    summary: ${JSON.stringify(options.summary ?? shape.summary)}`);
  if (options.cost) lines.push(`    cost: ${JSON.stringify(options.cost)}`);
  if (options.expiresIn) lines.push(`    expiresIn: ${options.expiresIn}`);
  if (options.policy) {
    lines.push('    policy:');
    for (const { when, ...rest } of options.policy) {
      lines.push(`      - when: ${JSON.stringify(when)}`);
      for (const [key, value] of Object.entries(rest)) if (value !== undefined) lines.push(`        ${key}: ${flow(value)}`);
    }
  }
  lines.push('    approval:', `      approvers: ${flow(options.approvers)}`);
  if (options.quorum !== undefined) lines.push(`      quorum: ${options.quorum}`);
  if (options.slack) lines.push(`      slack: ${flow({ channel: options.slack })}`);
  if (options.discord) lines.push(`      discord: ${flow({ channel: options.discord })}`);
  if (options.remind) lines.push(`      remind: ${flow(options.remind)}`);
  if (options.approverRule) lines.push(`      approverRule: ${JSON.stringify(options.approverRule)}`);
  if (options.escalate) {
    const { after, approvers, slack, discord } = options.escalate;
    lines.push(
      `      escalate: ${flow({ after, approvers, slack: slack === undefined ? undefined : { channel: slack }, discord: discord === undefined ? undefined : { channel: discord } })}`,
    );
  }
  if (options.grants) lines.push(`    grants: ${flow({ allow: true, maxDuration: options.grants.maxDuration, durations: options.grants.durations })}`);
  if (options.commit) lines.push(`    commit: ${options.commit}`);
  lines.push(`    executor: ${options.executor ?? '{ type: echo }'}`);
  return `${lines.join('\n')}\n`;
}

/** A whole config file: the operations given, then anything else (`people:`, `businesses:`). */
export function configYaml(operations: readonly string[], rest = ''): string {
  return `\noperations:\n${operations.join('')}${rest}`;
}

/**
 * `refund`: `amount_cents`, and with `customer` a required `customer` the summary names (with
 * `note`, an optional free-text `note` too).
 */
export function refundOperation(options: OperationOptions & { customer?: boolean; note?: boolean }): string {
  const { customer = false, note = false, ...rest } = options;
  return operationYaml(
    {
      name: 'refund',
      description: 'Refund a customer',
      required: customer ? ['customer', 'amount_cents'] : ['amount_cents'],
      properties: { ...(customer ? { customer: STRING } : {}), amount_cents: INTEGER, ...(note ? { note: STRING } : {}) },
      summary: customer ? '{{agent}} refunds {{params.amount_cents}} cents to {{params.customer}}.' : '{{agent}} refunds {{params.amount_cents}} cents.',
    },
    rest,
  );
}

/** `payout`: a supplier payment of `amount_cents`. */
export function payoutOperation(options: OperationOptions): string {
  return operationYaml(
    {
      name: 'payout',
      description: 'Pay a supplier',
      required: ['amount_cents'],
      properties: { amount_cents: INTEGER },
      summary: '{{agent}} pays {{params.amount_cents}} cents.',
    },
    options,
  );
}

/** `upgrade_plan`: `org` and `plan`, and with `amountCents` an optional `amount_cents` for a cost line. */
export function upgradePlanOperation(options: OperationOptions & { amountCents?: boolean }): string {
  const { amountCents = false, ...rest } = options;
  return operationYaml(
    {
      name: 'upgrade_plan',
      description: "Change an organisation's billing plan",
      required: ['org', 'plan'],
      properties: { org: STRING, plan: '{ type: string, enum: [pro, scale, enterprise] }', ...(amountCents ? { amount_cents: INTEGER } : {}) },
      summary: '{{agent}} is requesting to upgrade {{params.org}} to the {{params.plan}} plan.',
    },
    rest,
  );
}

/** `delete_workspace`: `workspace`, and with `amountCents` an optional `amount_cents` for a cost line. */
export function deleteWorkspaceOperation(options: OperationOptions & { amountCents?: boolean }): string {
  const { amountCents = false, ...rest } = options;
  return operationYaml(
    {
      name: 'delete_workspace',
      description: 'Delete a workspace',
      required: ['workspace'],
      properties: { workspace: STRING, ...(amountCents ? { amount_cents: INTEGER } : {}) },
      summary: '{{agent}} wants to delete workspace {{params.workspace}}.',
    },
    rest,
  );
}

/** `send_mailing`: a mailing to `list`. */
export function sendMailingOperation(options: OperationOptions): string {
  return operationYaml(
    { name: 'send_mailing', description: 'Send a mailing', required: ['list'], properties: { list: STRING }, summary: '{{agent}} mails {{params.list}}.' },
    options,
  );
}

/** `note`: every call approved by its policy rule and run at once by the echo executor (no human). */
export const RULE_APPROVED_NOTE = `  - name: note
    description: A note a rule approves
    params: { type: object, required: [text], properties: { text: { type: string } } }
    summary: "{{agent}} notes {{params.text}}."
    policy:
      - { when: "true", decide: approve, reason: notes are automatic }
    approval: { approvers: [web:alice] }
    commit: on_approve
    executor: { type: echo }
`;

/** The cost line the Slack and console suites show: the amount in dollars, when the agent gave one. */
export const USD_COST = "{{ params.amount_cents | usd | default: 'not stated' }}";
