import { jsonSchema, tool, type Tool, type ToolApprovalResponse, type ToolModelMessage } from 'ai';
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
}

export type TwokeyToolOutput = Pick<GatedResult, 'outcome' | 'result' | 'text' | 'proposalId'>;

export function twokeyTool(options: TwokeyToolOptions): Tool<Record<string, unknown>, TwokeyToolOutput> {
  return tool({
    description: options.description ?? `Runs the twokey operation ${options.operation} after a human approves it.`,
    inputSchema: jsonSchema<Record<string, unknown>>(options.inputSchema ?? { type: 'object' }),
    execute: async (input, { toolCallId, abortSignal }) => {
      // The tool call id is the idempotency key: a retried step finds the same proposal.
      const gated = await proposeAndAwait(options.client, {
        operation: options.operation,
        params: input,
        idempotencyKey: `ai-sdk:${toolCallId}`,
        ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
        ...(abortSignal ? { signal: abortSignal } : {}),
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
 */
export interface ApprovalRequestPart {
  type: 'tool-approval-request';
  approvalId: string;
  toolCall: { toolCallId: string; toolName: string; input: unknown };
}

export async function answerApprovalRequests(
  client: Twokey,
  content: readonly { type: string }[],
  options: { operationFor: (toolName: string) => string; waitMs?: number },
): Promise<ToolModelMessage | null> {
  const requests = content.filter((part): part is ApprovalRequestPart => part.type === 'tool-approval-request');
  if (requests.length === 0) return null;
  const responses = await Promise.all(
    requests.map(async (request): Promise<ToolApprovalResponse> => {
      const gated = await proposeAndAwait(client, {
        operation: options.operationFor(request.toolCall.toolName),
        params: { tool: request.toolCall.toolName, input: request.toolCall.input },
        idempotencyKey: `ai-sdk-approval:${request.approvalId}`,
        ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
      });
      const approved = gated.outcome.userConsent && gated.outcome.outcome !== 'failed';
      return { type: 'tool-approval-response', approvalId: request.approvalId, approved, reason: gated.text };
    }),
  );
  return { role: 'tool', content: responses };
}
