import { TwokeyError } from './errors.js';
import { newId } from './ids.js';
import type { AgentRecord, Clock } from './model.js';
import type { Store } from './ports.js';
import { displayPrefix, mintApiKey, mintCallbackSecret, sha256Hex } from './secrets.js';

const AGENT_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/i;
const IDENTITY = /^(slack:(group:)?[A-Z0-9]+|discord:(user|role):\d{15,21}|web:[A-Za-z0-9_.@-]{1,64})$/;

export interface CreateAgentInput {
  name: string;
  owners?: string[];
  operations?: string[] | null;
}

export interface AgentServiceDeps {
  store: Store;
  clock: Clock;
  /** Names of the configured operations, to refuse typos in `--operations`. */
  knownOperations(): string[];
}

export function createAgentService({ store, clock, knownOperations }: AgentServiceDeps) {
  async function create(input: CreateAgentInput) {
    if (!AGENT_NAME.test(input.name)) {
      throw new TwokeyError('invalid_request', 'agent name must be 1-63 letters, digits, "_", "-" or "."');
    }
    const owners = input.owners ?? [];
    const badOwner = owners.find((owner) => !IDENTITY.test(owner));
    if (badOwner !== undefined) {
      throw new TwokeyError('invalid_request', `owner "${badOwner}" is not an identity like slack:U…, discord:user:…, web:NAME`);
    }
    const operations = input.operations ?? null;
    const unknown = operations?.filter((name) => !knownOperations().includes(name)) ?? [];
    if (unknown.length > 0) throw new TwokeyError('unknown_operation', `unknown operation(s): ${unknown.join(', ')}`);
    if (await store.findAgentByName(input.name)) {
      throw new TwokeyError('conflict', `an agent named "${input.name}" already exists`);
    }
    const apiKey = mintApiKey();
    const callbackSecret = mintCallbackSecret();
    const now = clock();
    const agent: AgentRecord = {
      id: newId('agt'),
      name: input.name,
      keyHash: sha256Hex(apiKey),
      keyPrefix: displayPrefix(apiKey),
      callbackSecret,
      owners,
      operations,
      createdAt: now,
      revokedAt: null,
    };
    await store.transaction(async (tx) => {
      await tx.insertAgent(agent);
      await tx.appendAudit(
        { type: 'agent.created', actor: 'operator', agentId: agent.id, data: { name: agent.name, owners, operations } },
        now,
      );
    });
    return { agent, apiKey, callbackSecret };
  }

  async function revoke(name: string): Promise<AgentRecord> {
    const agent = await store.findAgentByName(name);
    if (!agent) throw new TwokeyError('not_found', `no agent named "${name}"`);
    if (agent.revokedAt) return agent;
    const now = clock();
    await store.transaction(async (tx) => {
      await tx.revokeAgent(agent.id, now);
      await tx.appendAudit({ type: 'agent.revoked', actor: 'operator', agentId: agent.id, data: { name } }, now);
    });
    return { ...agent, revokedAt: now };
  }

  /** The agent behind an API key; unknown and revoked keys are refused with a message saying which. */
  async function authenticate(apiKey: string): Promise<AgentRecord> {
    const agent = apiKey.startsWith('tk_agent_') ? await store.findAgentByKeyHash(sha256Hex(apiKey)) : null;
    if (!agent) throw new TwokeyError('unauthorized', 'unknown API key');
    if (agent.revokedAt) throw new TwokeyError('unauthorized', `the API key of agent "${agent.name}" was revoked`);
    return agent;
  }

  return { create, revoke, authenticate, list: () => store.listAgents() };
}

export type AgentService = ReturnType<typeof createAgentService>;
