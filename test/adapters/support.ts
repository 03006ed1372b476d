import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { ExecutionRequest, Executor } from '../../src/core/executor.js';
import { Twokey } from '@twokey/client';
import type { Driver } from '../support/database.js';
import { startConsoleTwokey, type ConsoleTwokey } from '../console/support.js';

/** The operations the framework adapters are tried against: a refund twokey runs itself, one the agent commits, and a generic tool approval. */
export const adapterConfigYaml = `
operations:
  - name: refund
    description: Refund a customer's order
    confirmationType: payment
    params:
      type: object
      required: [order, amount_cents]
      properties:
        order: { type: string }
        amount_cents: { type: integer, minimum: 1 }
    summary: "{{agent}} wants to refund {{params.amount_cents | usd}} on order {{params.order}}."
    approval:
      approvers: [web:operator]
    commit: on_approve
    executor: { type: echo }
  - name: refund_by_agent
    description: Refund a customer's order, committed by the agent
    params:
      type: object
      required: [order, amount_cents]
      properties:
        order: { type: string }
        amount_cents: { type: integer, minimum: 1 }
    summary: "{{agent}} wants to refund {{params.amount_cents | usd}} on order {{params.order}}."
    approval:
      approvers: [web:operator]
    commit: agent
    executor: { type: echo }
  - name: approve_tool_call
    description: Let an agent framework run one of its own tools
    params:
      type: object
      required: [tool, input]
      properties:
        tool: { type: string }
        input: { type: object, additionalProperties: true }
        callId: { type: string }
    summary: "{{agent}} wants to run its tool {{params.tool}}."
    approval:
      approvers: [web:operator]
    commit: on_approve
    executor: { type: echo }
`;

export interface AdapterHarness {
  twokey: ConsoleTwokey;
  client: Twokey;
  apiKey: string;
  baseUrl: string;
  /** Every execution the executor saw, by operation. */
  executions: ExecutionRequest[];
  /** Waits until a proposal of `operation` is pending and returns its id (polling the core: the human's view). */
  pendingProposal(operation: string, options?: { excluding?: readonly string[] }): Promise<string>;
  /** The human's click in the web console. */
  approve(proposalId: string): Promise<void>;
  reject(proposalId: string, reason: string): Promise<void>;
  close(): Promise<void>;
}

export async function startAdapterHarness(driver: Driver): Promise<AdapterHarness> {
  const executions: ExecutionRequest[] = [];
  const counting: Executor = {
    kind: 'local',
    async run(request) {
      executions.push(request);
      return { refunded: request.params['amount_cents'] ?? null, operation: request.operation };
    },
  };
  const twokey = await startConsoleTwokey({ driver, listen: true, configYaml: adapterConfigYaml, executorFor: () => counting });
  const { apiKey } = await twokey.createAgent('shopbot');
  const client = new Twokey({ baseUrl: twokey.baseUrl, apiKey });
  const operator = await twokey.signIn('operator');

  async function pendingProposal(operation: string, options: { excluding?: readonly string[] } = {}): Promise<string> {
    for (let attempt = 0; attempt < 400; attempt++) {
      const pending = await twokey.services.store.listProposals({ status: 'pending' });
      const match = pending.find((proposal) => proposal.operation === operation && !options.excluding?.includes(proposal.id));
      if (match) return match.id;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error(`no pending ${operation} proposal appeared`);
  }

  async function decide(proposalId: string, action: 'approve' | 'reject', fields: Record<string, string>) {
    const answer = await twokey.form(
      `/console/proposals/${proposalId}/${action}`,
      { _csrf: operator.csrf, return: '/console', ...fields },
      { cookie: operator.cookie },
    );
    if (answer.status !== 303) throw new Error(`console ${action} answered ${answer.status}: ${answer.body.slice(0, 200)}`);
  }

  return {
    twokey,
    client,
    apiKey,
    baseUrl: twokey.baseUrl,
    executions,
    pendingProposal,
    approve: (id) => decide(id, 'approve', {}),
    reject: (id, reason) => decide(id, 'reject', { reason }),
    close: () => twokey.close(),
  };
}

/** Runs one process of an agent host (a fixture script, through tsx) to completion; its last stdout line, parsed. */
export async function runHostProcess(script: string, args: string[], env: Record<string, string>): Promise<any> {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'close')) as [number | null];
  if (code !== 0) throw new Error(`host ${args[0]} exited ${code}: ${stderr}`);
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? 'null');
}
