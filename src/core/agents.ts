import { RefusalError, TwokeyError } from './errors.js';
import type { IdentityGrammar } from './identity.js';
import { newId } from './ids.js';
import { OPERATOR, agentRevokeRight, type Revoker } from './agent-revocation.js';
import type { AgentRecord, Clock } from './model.js';
import type { Store } from './ports.js';
import { displayPrefix, mintApiKey, mintCallbackSecret, sha256Hex } from './secrets.js';

const AGENT_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/i;
/** What `mintApiKey` makes: the prefix and 32 random bytes in base64url. */
const API_KEY_SHAPE = /^tk_agent_[A-Za-z0-9_-]{43}$/;

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
  /** The configured operations' approvers, for the rule of who besides the operator may revoke. */
  operations(): readonly { name: string; approval: { approvers: readonly string[] } }[];
  /** The identity grammar, with every chat platform's forms: an owner must be one person in it. */
  identities: Pick<IdentityGrammar, 'parsePersonIdentity' | 'PERSON_FORMS'>;
}

export function createAgentService({ store, clock, knownOperations, operations, identities }: AgentServiceDeps) {
  async function create(input: CreateAgentInput) {
    if (!AGENT_NAME.test(input.name)) {
      throw new TwokeyError('invalid_request', 'agent name must be 1-63 letters, digits, "_", "-" or "."');
    }
    const owners = input.owners ?? [];
    // An owner is one person: a group or role owner would match no click, so it would protect nothing.
    const badOwner = owners.find((owner) => !identities.parsePersonIdentity(owner));
    if (badOwner !== undefined) {
      throw new TwokeyError('invalid_request', `owner "${badOwner}" is not one person's identity (${identities.PERSON_FORMS})`);
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
      await tx.appendAudit({ type: 'agent.created', actor: 'operator', agentId: agent.id, data: { name: agent.name, owners, operations } }, now);
    });
    return { agent, apiKey, callbackSecret };
  }

  /** Revokes the agent's key and audits who did it, in one transaction; revoking twice changes nothing. */
  async function revoke(name: string, by: Revoker = OPERATOR): Promise<AgentRecord> {
    const agent = await store.findAgentByName(name);
    if (!agent) throw new TwokeyError('not_found', `no agent named "${name}"`);
    return revokeRecord(agent, by);
  }

  async function revokeRecord(agent: AgentRecord, by: Revoker): Promise<AgentRecord> {
    if (agent.revokedAt) return agent;
    const now = clock();
    await store.transaction(async (tx) => {
      await tx.revokeAgent(agent.id, now);
      await tx.appendAudit({ type: 'agent.revoked', actor: by.actor, agentId: agent.id, data: { name: agent.name, ...(by.via ? { via: by.via } : {}) } }, now);
    });
    return { ...agent, revokedAt: now };
  }

  /** A person's revocation (the console): refused with the reason unless agentRevokeRight allows it. */
  async function revokeAsPerson(name: string, by: Revoker): Promise<AgentRecord> {
    const agent = await store.findAgentByName(name);
    if (!agent) throw new TwokeyError('not_found', `There is no agent named “${name}”.`);
    const right = agentRevokeRight(by.actor, agent, operations());
    if (!right.can) throw new TwokeyError('not_an_approver', right.why);
    return revokeRecord(agent, by);
  }

  /** What the person may do to each agent, for a page that offers the button only where it works. */
  const revokeRightOf = (person: string, agent: AgentRecord) => agentRevokeRight(person, agent, operations());

  /**
   * The agent behind an API key; unknown and revoked keys are refused with a message saying which.
   * A string that is not shaped like a key is refused without a database read: junk costs nothing.
   */
  async function authenticate(apiKey: string): Promise<AgentRecord> {
    const agent = API_KEY_SHAPE.test(apiKey) ? await store.findAgentByKeyHash(sha256Hex(apiKey)) : null;
    if (!agent) throw new RefusalError('unauthorized', 'unknown_key', 'unknown API key');
    if (agent.revokedAt) throw new RefusalError('unauthorized', 'revoked_key', `the API key of agent "${agent.name}" was revoked`);
    return agent;
  }

  return { create, revoke, revokeAsPerson, revokeRightOf, authenticate, list: () => store.listAgents() };
}

export type AgentService = ReturnType<typeof createAgentService>;
