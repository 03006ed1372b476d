/**
 * One full cycle as the outside world sees it: an agent proposes over HTTP, the approval request
 * reaches chat, a human clicks Approve, the downstream service is called, the agent sees the
 * proposal committed.
 */
import { performance } from 'node:perf_hooks';
import type { AgentClient } from './twokey-process.js';
import type { World } from './world.js';

export interface CycleTimes {
  /** POST /v1/proposals until its 201. */
  propose: number;
  /** Proposal sent until the approval request reached the chat API. */
  post: number;
  /** The click's own HTTP round trip (what Slack and Discord time out on). */
  ack: number;
  /** Click sent until the downstream service was called. */
  execute: number;
  /** Downstream called until the agent's long-poll saw `committed`. */
  commit: number;
  cycle: number;
}

export type Chat = 'slack' | 'discord';

/**
 * One cycle, timed by step. `between`, when given, runs after each step (propose, post, click,
 * execute, commit) and is not counted in its times: bench/cycle-steps.ts reads the server's CPU there.
 */
export async function approveCycle(
  world: World,
  baseUrl: string,
  chat: Chat,
  agent: AgentClient,
  n: number,
  between: () => Promise<void> = async () => {},
): Promise<CycleTimes> {
  const started = performance.now();
  const id = await agent.propose(`bench_${chat}`, { n });
  const proposed = performance.now();
  await between();
  const posted = await world.arrivals.wait(`${chat}:${id}`);
  await between();
  const clicked = performance.now();
  const ack = chat === 'slack' ? await world.slackClick(baseUrl, id) : await world.discordClick(baseUrl, id);
  await between();
  const executed = await world.arrivals.wait(`executed:${id}`);
  await between();
  await agent.until(id, 'committed');
  const committed = performance.now();
  await between();
  return { propose: proposed - started, post: posted - started, ack, execute: executed - clicked, commit: committed - executed, cycle: committed - started };
}

export const CYCLE_STEPS = ['propose', 'post', 'ack', 'execute', 'commit', 'cycle'] as const;
