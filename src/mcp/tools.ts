import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { OperationDefinition } from '../config/config-file.js';
import type { AgentRecord } from '../core/model.js';
import { OUTCOME_KINDS } from '../core/outcome.js';
import { describeChatParts } from '../platforms/index.js';

/** The structured answer of every gated tool: the outcome every agent-facing answer carries, plus the result. */
export const outcomeOutputSchema = {
  type: 'object',
  required: ['outcome', 'userConsent', 'retryable', 'decidedBy', 'proposalId'],
  properties: {
    outcome: { type: 'string', enum: [...OUTCOME_KINDS] },
    userConsent: { type: 'boolean' },
    retryable: { type: 'boolean' },
    reason: { type: ['string', 'null'] },
    decidedBy: { type: 'array', items: { type: 'string' } },
    proposalId: { type: 'string' },
    result: {},
  },
} as const;

export function mayPropose(agent: AgentRecord, operation: Pick<OperationDefinition, 'name'>): boolean {
  return !agent.operations || agent.operations.includes(operation.name);
}

function humanDuration(ms: number): string {
  const minutes = ms / 60_000;
  if (minutes >= 1440 && Number.isInteger(minutes / 1440)) return `${minutes / 1440} d`;
  if (minutes >= 60 && Number.isInteger(minutes / 60)) return `${minutes / 60} h`;
  if (minutes >= 1 && Number.isInteger(minutes)) return `${minutes} min`;
  return `${Math.round(ms / 1000)} s`;
}

/** Who must say yes, where, and for how long: the words a model needs before it calls. */
export function approvalText(operation: OperationDefinition): string {
  if (operation.autoApprove) {
    return `No human approval: ${operation.autoApprove.reason}; every call is recorded in twokey's audit log.`;
  }
  const { approvers, quorum } = operation.approval;
  const where = [...describeChatParts(operation.approval), approvers.some((identity) => identity.startsWith('web:')) ? 'the twokey web console' : null].filter(
    (place): place is string => place !== null,
  );
  const commit =
    operation.commit === 'agent'
      ? 'Once approved, it runs when this tool is called (the waiting call, or the same call repeated).'
      : 'It runs as soon as it is approved.';
  return (
    `Requires approval by ${quorum} of ${approvers.join(', ')}${where.length > 0 ? ` (asked in ${where.join(' and ')})` : ''}; ` +
    `the request expires after ${humanDuration(operation.expiresInMs)} if nobody decides. ${commit} ` +
    'Calling again with the same arguments returns the same request and its decision, never a second request.'
  );
}

/**
 * `text` cut to at most `max` characters at a word boundary, with `…` when cut. A word longer than
 * the limit is cut inside (the only way to stay within it).
 */
export function cutAtWord(text: string, max: number): string {
  const characters = [...text];
  if (characters.length <= max) return text;
  const head = characters.slice(0, max - 1).join('');
  // The last word is whole when the text goes on with a space; otherwise drop its cut part.
  const whole = /^\s/.test(characters[max - 1] ?? '') ? head : head.replace(/\s+\S*$/, '');
  return `${(whole || head).trimEnd()}…`;
}

const TITLE_LENGTH = 100;

/** One gated tool per operation the agent may propose (name = operation, input = its params schema). */
export function toolOf(operation: OperationDefinition): Tool {
  const readOnly = operation.upstreamTool?.readOnly === true;
  const openWorld = operation.executor.type !== 'echo';
  const described = operation.description.trim().replace(/\.?$/, '.');
  const title = operation.title ?? (cutAtWord(operation.description.split('\n')[0]?.trim() ?? '', TITLE_LENGTH) || operation.name);
  return {
    name: operation.name,
    title,
    // An upstream's words come after twokey's own: what the model reads first about approval is true.
    description: operation.upstreamTool ? `${approvalText(operation)} ${described}` : `${described} ${approvalText(operation)}`,
    inputSchema: operation.paramsSchema as Tool['inputSchema'],
    outputSchema: outcomeOutputSchema as unknown as Tool['outputSchema'],
    annotations: {
      title,
      readOnlyHint: readOnly,
      destructiveHint: !readOnly,
      // Calling again with the same arguments returns the same proposal: twokey makes every tool idempotent.
      idempotentHint: true,
      openWorldHint: openWorld,
    },
  };
}

/**
 * Each operation's tool, built once: a definition does not change while it is loaded (a new config
 * makes new definitions), and every tools/list of every agent asks for the same ones.
 */
const builtTools = new WeakMap<OperationDefinition, Tool>();

function cachedToolOf(operation: OperationDefinition): Tool {
  let tool = builtTools.get(operation);
  if (!tool) {
    tool = toolOf(operation);
    builtTools.set(operation, tool);
  }
  return tool;
}

export function toolsFor(agent: AgentRecord, operations: readonly OperationDefinition[]): Tool[] {
  return operations.filter((operation) => mayPropose(agent, operation)).map(cachedToolOf);
}
