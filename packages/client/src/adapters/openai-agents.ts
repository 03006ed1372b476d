import { RunState, tool, type Agent, type RunContext, type RunToolApprovalItem } from '@openai/agents';
import type { Twokey } from '../sdk/index.js';
import { gatedResultOf, proposeAndAwait, waitUntilSettled, type GatedResult } from './gate.js';

/**
 * `twokey/openai-agents`: twokey-gated tools for the OpenAI Agents SDK, and a bridge that hands a
 * run's `needsApproval` interruptions to twokey and resumes the run when humans decide, with the
 * paused `RunState` kept in twokey so the agent's host keeps no state between the two.
 */
export interface TwokeyAgentToolOptions {
  client: Twokey;
  operation: string;
  description?: string;
  /** JSON Schema of the arguments; default: an open object that twokey validates. */
  parameters?: Record<string, unknown>;
  waitMs?: number;
  /**
   * The conversation a call belongs to, or how to read it from the run's context: the same call in two
   * conversations is two requests. Default: none, so the same call for this agent is one request while open.
   */
  conversation?: string | ((context: RunContext<unknown> | undefined) => string | undefined);
}

// Any agent, whatever its context and output types: the bridge only moves its run state around.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyAgent = Agent<any, any>;

type JsonObjectSchema = { type: 'object'; properties: Record<string, never>; required: string[]; additionalProperties: true };

/** A tool whose call is a twokey proposal; the model reads the outcome's words (never a bare error it might retry around). */
export function twokeyTool(options: TwokeyAgentToolOptions) {
  return tool({
    name: options.operation,
    description: options.description ?? `Runs the twokey operation ${options.operation} after a human approves it.`,
    // Not strict: twokey's own schema check answers with every problem listed.
    strict: false,
    parameters: (options.parameters ?? { type: 'object', properties: {}, required: [], additionalProperties: true }) as JsonObjectSchema,
    execute: async (input, context) => {
      // Not the call id: a model told to call again makes a new call with a new id. The request identity
      // (operation, canonical arguments, conversation) finds the request it is waiting for.
      const conversation = typeof options.conversation === 'function' ? options.conversation(context) : options.conversation;
      const gated = await proposeAndAwait(options.client, {
        operation: options.operation,
        params: (typeof input === 'string' ? JSON.parse(input) : input) as Record<string, unknown>,
        conversation,
        ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
      });
      return gated.text;
    },
  });
}

/** A paused run handed to twokey: one proposal per interruption, the run's state parked beside each. */
export interface SubmittedRun {
  proposalIds: string[];
}

const callIdOf = (item: RunToolApprovalItem): string => {
  const raw = item.rawItem as { callId?: string; id?: string };
  const id = raw.callId ?? raw.id;
  if (!id) throw new Error(`the interruption for ${item.name ?? 'a tool'} carries no call id`);
  return id;
};

/**
 * Turns a run's `needsApproval` interruptions into twokey proposals of `operation` (params: the
 * tool's name and arguments) and parks the serialized run state beside them. The process may exit
 * afterwards: `resumeRun` continues from any process with the same API key.
 */
export async function submitInterruptions(
  client: Twokey,
  result: { interruptions: readonly RunToolApprovalItem[]; state: { toString(): string } },
  options: { operation: string },
): Promise<SubmittedRun> {
  const state = result.state.toString();
  const proposalIds: string[] = [];
  for (const item of result.interruptions) {
    const created = await client.propose(
      { operation: options.operation, params: { tool: item.name ?? 'unknown', input: parseArguments(item.arguments), callId: callIdOf(item) } },
      { idempotencyKey: `openai-agents-approval:${callIdOf(item)}` },
    );
    await client.putResumeState(created.id, state);
    proposalIds.push(created.id);
  }
  return { proposalIds };
}

function parseArguments(text: string | undefined): Record<string, unknown> {
  if (!text) return {};
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : { value: parsed };
  } catch {
    return { text };
  }
}

export interface ResumableRun {
  /** The run state with every decided interruption approved or rejected; pass it to `run(agent, state)`. */
  state: RunState<unknown, AnyAgent>;
  decisions: GatedResult[];
  /** Interruptions still waiting for a human (a later `resumeRun` can pick them up). */
  undecided: string[];
}

/**
 * Waits (up to `waitMs`) for the proposals of a submitted run, loads the parked state and applies
 * each decision: consent approves the tool call, anything else rejects it with the words the model
 * must read (the action did not happen; do not work around it).
 */
export async function resumeRun(
  client: Twokey,
  agent: AnyAgent,
  proposalIds: readonly string[],
  options: { operation: string; waitMs?: number },
): Promise<ResumableRun> {
  const first = proposalIds[0];
  if (!first) throw new Error('resumeRun needs at least one proposal id');
  const state = await RunState.fromString(agent, await client.getResumeState(first));
  const byCallId = new Map(state.getInterruptions().map((item) => [callIdOf(item), item]));
  const decisions: GatedResult[] = [];
  const undecided: string[] = [];
  for (const id of proposalIds) {
    const view = await waitUntilSettled(client, id, options.operation, options.waitMs ?? 50_000);
    const decision = gatedResultOf(view);
    const item = byCallId.get(String(view.params['callId']));
    if (!item) throw new Error(`proposal ${id} is not one of this run's interruptions`);
    if (decision.outcome.outcome === 'pending') {
      undecided.push(id);
      continue;
    }
    decisions.push(decision);
    if (decision.outcome.userConsent && decision.outcome.outcome === 'committed') state.approve(item);
    else state.reject(item, { message: decision.text });
  }
  return { state, decisions, undecided };
}
