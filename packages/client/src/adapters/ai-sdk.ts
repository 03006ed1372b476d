import { jsonSchema, tool, type Tool, type ToolApprovalResponse, type ToolExecutionOptions, type ToolModelMessage } from 'ai';
import type { Twokey } from '../sdk/index.js';
import { proposeAndAwait, type GatedResult } from './gate.js';

/**
 * `twokey/ai-sdk`: twokey-gated tools for the Vercel AI SDK (v6). The tool's `execute` proposes
 * through twokey and answers with what happened; the operation itself runs inside twokey, which
 * holds the credentials, so the model never gets a way around the human.
 */
export interface TwokeyToolOptions {
  client: Twokey;
  /** The twokey operation this tool proposes. */
  operation: string;
  /** What the model reads about the tool; default: the operation's own description. */
  description?: string;
  /** JSON Schema of the arguments; default: accept an object and let twokey validate it (errors come back listing every problem). */
  inputSchema?: Record<string, unknown>;
  /** How long one call waits for a human before answering `pending` (default 50 s). */
  waitMs?: number;
  /**
   * The conversation a call belongs to (a chat id), or how to read it from the call's options (e.g.
   * from `experimental_context`): the same call in two conversations is two requests. Default: none,
   * so the same call anywhere for this agent is one request while it is open.
   */
  conversation?: string | ((options: ToolExecutionOptions) => string | undefined);
}

export type TwokeyToolOutput = Pick<GatedResult, 'outcome' | 'result' | 'text' | 'proposalId'>;

export function twokeyTool(options: TwokeyToolOptions): Tool<Record<string, unknown>, TwokeyToolOutput> {
  return tool({
    description: options.description ?? `Runs the twokey operation ${options.operation} after a human approves it.`,
    inputSchema: jsonSchema<Record<string, unknown>>(options.inputSchema ?? { type: 'object' }),
    execute: async (input, execution) => {
      // Not the tool call id: a model told to call again makes a new call with a new id. The request
      // identity (operation, canonical arguments, conversation) finds the request it is waiting for.
      const conversation = typeof options.conversation === 'function' ? options.conversation(execution) : options.conversation;
      const gated = await proposeAndAwait(options.client, {
        operation: options.operation,
        params: input,
        conversation,
        ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
        ...(execution.abortSignal ? { signal: execution.abortSignal } : {}),
      });
      return { outcome: gated.outcome, result: gated.result, text: gated.text, proposalId: gated.proposalId };
    },
    // The model reads the words, not the JSON: they say when the action did not happen.
    toModelOutput: ({ output }) => ({ type: 'text', value: output.text }),
  });
}

/** A tool for every operation this agent may propose, with the operation's params schema. */
export async function twokeyTools(client: Twokey, options: { waitMs?: number } = {}): Promise<Record<string, Tool<Record<string, unknown>, TwokeyToolOutput>>> {
  const operations = await client.operations();
  return Object.fromEntries(
    operations.map((operation) => [
      operation.name,
      twokeyTool({
        client,
        operation: operation.name,
        description: operation.description,
        inputSchema: operation.params,
        ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
      }),
    ]),
  );
}

/**
 * A bridge for the AI SDK's own approval hook: tools declared with `needsApproval` make
 * `generateText` stop with `tool-approval-request` parts. This asks twokey for each (policies may
 * decide at once; otherwise a human in Slack, Discord or the console) and returns the tool message
 * of approval responses to append before calling `generateText` again. The tool then runs in the
 * agent's process: use `twokeyTool` instead when twokey should hold the credentials.
 *
 * Only decisions are answered. A request nobody decided within `waitMs` stays the AI SDK's pending
 * approval: this throws `ApprovalsPendingError`, and calling again later with the same content finds
 * the same requests. (An undecided request answered as a denial would end the tool call while the
 * request stays approvable in twokey, where an approval would then do nothing.)
 */
export interface ApprovalRequestPart {
  type: 'tool-approval-request';
  approvalId: string;
  toolCall: { toolCallId: string; toolName: string; input: unknown };
}

/** Some approval requests are still undecided in twokey: nothing was answered; call again later. */
export class ApprovalsPendingError extends Error {
  override readonly name = 'ApprovalsPendingError';

  constructor(
    /** The undecided requests: the AI SDK's approval id and twokey's proposal id. */
    readonly pending: readonly { approvalId: string; proposalId: string }[],
  ) {
    super(
      `twokey has no decision yet on ${pending.length === 1 ? 'request' : 'requests'} ${pending.map((entry) => entry.proposalId).join(', ')}; ` +
        'answer the approval requests again later (the same requests are found, nobody is asked twice)',
    );
  }
}

export async function answerApprovalRequests(
  client: Twokey,
  content: readonly { type: string }[],
  options: { operationFor: (toolName: string) => string; waitMs?: number; conversation?: string },
): Promise<ToolModelMessage | null> {
  const requests = content.filter((part): part is ApprovalRequestPart => part.type === 'tool-approval-request');
  if (requests.length === 0) return null;
  const decisions = await Promise.all(
    requests.map(async (request) => ({
      request,
      gated: await proposeAndAwait(client, {
        operation: options.operationFor(request.toolCall.toolName),
        params: { tool: request.toolCall.toolName, input: request.toolCall.input },
        conversation: options.conversation,
        // The same approval request answered again gets the same answer, even once it was seen.
        idempotencyKey: `ai-sdk-approval:${request.approvalId}`,
        ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
      }),
    })),
  );
  const pending = decisions.filter(({ gated }) => gated.outcome.outcome === 'pending');
  if (pending.length > 0)
    throw new ApprovalsPendingError(pending.map(({ request, gated }) => ({ approvalId: request.approvalId, proposalId: gated.proposalId })));
  const responses = decisions.map(({ request, gated }): ToolApprovalResponse => {
    const approved = gated.outcome.userConsent && gated.outcome.outcome !== 'failed';
    return { type: 'tool-approval-response', approvalId: request.approvalId, approved, reason: gated.text };
  });
  return { role: 'tool', content: responses };
}
