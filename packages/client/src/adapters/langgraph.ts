import { Command, getConfig, interrupt, type LangGraphRunnableConfig } from '@langchain/langgraph';
import type { Twokey } from '../sdk/index.js';
import { gatedResultOf, proposeAndAwait, waitUntilSettled, type GatedResult } from './gate.js';

/**
 * `twokey/langgraph`: a gate to call inside a LangGraph node, and a helper that resumes the thread
 * once humans decide. The node re-runs from its start when the thread resumes, so the proposal is made
 * under a key fixed by the node's call (the thread and the task LangGraph resumes, named by its
 * `checkpoint_ns`): the re-run finds the same proposal instead of asking again, and the decision is
 * read from twokey, never taken from the resume value. A later call of the node (a second refund in the
 * same thread) is a new task, hence a new request; while an identical request is still open in the
 * thread, twokey's request identity (conversation = the thread) answers with that one.
 */
export interface GateOptions {
  operation: string;
  params: Record<string, unknown>;
  /** Names this gate within the node (default: the operation); two gates of one operation in one node need two names. */
  step?: string;
  /** How long the node waits before pausing the thread with `interrupt()` (default 0: pause at once). */
  waitMs?: number;
  /**
   * How long the resumed node waits for the decision (and an `on_approve` execution) before answering
   * `pending` (default 50 s). `resumeWhenDecided` resumes only once decided; a thread resumed earlier
   * by other means answers `pending`, and the same call again finds the same request.
   */
  resumedWaitMs?: number;
}

/** What the thread is paused on: `resumeWhenDecided` reads it from the thread's state. */
export interface TwokeyInterrupt {
  twokey: { proposalId: string; operation: string; summary: string };
}

const RESUMED_WAIT_MS = 50_000;

async function sha256Hex(text: string): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/** The node's call in the thread, as an Idempotency-Key (visible ASCII, bounded whatever the thread id is). */
const nodeCallKey = async (thread: string, task: string, step: string) => `langgraph:${await sha256Hex(JSON.stringify([thread, task, step]))}`;

/** The thread as twokey's `conversation` (at most 512 characters, no control characters): a digest when it does not fit. */
const conversationOf = async (thread: string) => (thread.length <= 512 && !/\p{Cc}/u.test(thread) ? thread : `sha256:${await sha256Hex(thread)}`);

export async function twokeyGate(client: Twokey, options: GateOptions, config: LangGraphRunnableConfig = getConfig()): Promise<GatedResult> {
  const thread = config.configurable?.['thread_id'];
  if (typeof thread !== 'string' || thread === '') throw new Error('twokeyGate needs a thread_id in the graph config (and a checkpointer) to pause and resume');
  // The task of this node call: the same when the thread resumes it, a new one when the node runs again.
  const task = config.configurable?.['checkpoint_ns'];
  if (typeof task !== 'string' || task === '') throw new Error('twokeyGate must be called inside a LangGraph node (no checkpoint_ns in the config)');
  const call = {
    operation: options.operation,
    params: options.params,
    conversation: await conversationOf(thread),
    idempotencyKey: await nodeCallKey(thread, task, options.step ?? options.operation),
    waitMs: options.waitMs ?? 0,
  };
  const first = await proposeAndAwait(client, call);
  if (first.outcome.outcome !== 'pending') return first;
  const pause: TwokeyInterrupt = { twokey: { proposalId: first.proposalId, operation: options.operation, summary: first.summary } };
  interrupt(pause);
  // Resumed: whatever the resumer passed, the decision is twokey's. An approved operation may still be
  // running its executor, so this wait is a real one; `commit: agent` operations are committed here.
  return proposeAndAwait(client, { ...call, waitMs: options.resumedWaitMs ?? RESUMED_WAIT_MS });
}

/** The two methods of a compiled graph that resuming needs. */
export interface ResumableGraph<Output> {
  getState(config: LangGraphRunnableConfig): Promise<{ tasks: readonly { interrupts: readonly { value?: unknown }[] }[] }>;
  invoke(input: unknown, config: LangGraphRunnableConfig): Promise<Output>;
}

/**
 * Waits for the decision on the proposal a thread is paused on, then resumes the thread with
 * `Command({ resume })` carrying the outcome. Works from any process that has the graph and its
 * checkpointer; returns `null` when the thread is not paused on twokey, or the wait ran out.
 */
export async function resumeWhenDecided<Output>(
  client: Twokey,
  graph: ResumableGraph<Output>,
  config: LangGraphRunnableConfig,
  options: { waitMs?: number } = {},
): Promise<{ decision: GatedResult; output: Output } | null> {
  const snapshot = await graph.getState(config);
  const paused = snapshot.tasks
    .flatMap((task) => task.interrupts)
    .map((pending) => pending.value)
    .find(isTwokeyInterrupt);
  if (!paused) return null;
  const { proposalId, operation } = paused.twokey;
  const decided = gatedResultOf(await waitUntilSettled(client, proposalId, operation, options.waitMs ?? 5 * 60_000));
  if (decided.outcome.outcome === 'pending') return null;
  const output = await graph.invoke(new Command({ resume: decided }), config);
  // The resumed node may have committed a `commit: agent` operation: report what twokey says now.
  return { decision: gatedResultOf(await client.get(proposalId)), output };
}

function isTwokeyInterrupt(value: unknown): value is TwokeyInterrupt {
  if (typeof value !== 'object' || value === null || !('twokey' in value)) return false;
  const inner = (value as { twokey: unknown }).twokey;
  return typeof inner === 'object' && inner !== null && typeof (inner as { proposalId?: unknown }).proposalId === 'string';
}
