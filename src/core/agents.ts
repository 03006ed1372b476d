import { performance } from 'node:perf_hooks';
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
  /** How long, at most, a key authenticated once is taken without reading its agent again (see `createKeyCache`). */
  keyCacheMaxAgeMs?: number;
}

/**
 * The longest an entry of the key cache is trusted without a read. Revocations reach the cache at
 * once (below); this bound is only for the revocation whose notification was lost on a connection
 * that failed without anyone noticing.
 */
export const KEY_CACHE_MAX_AGE_MS = 10_000;
/** Agents are few; the bound keeps a flood of valid keys from growing the map. */
const KEY_CACHE_MAX_ENTRIES = 10_000;

/**
 * The agents behind keys that authenticated recently, so a busy agent's every request does not read
 * its row again. An agent row changes once: when it is revoked. Every revocation empties the
 * agent's entries — in this process at its commit, in every other replica through the notification
 * the revocation sends with its own commit (src/db: `AGENT_CHANNEL`; a replica that reconnects to
 * it forgets everything, since it may have missed one) — so a revoked key is refused as soon as the
 * notification arrives, as it would be by a request that read the row while the revocation was
 * committing. Only keys that authenticated are kept: an unknown or revoked key is read every time.
 */
function createKeyCache(maxAgeMs: number) {
  const entries = new Map<string, { agent: AgentRecord; until: number }>();
  // A read that started before a revocation was forgotten must not put its (older) answer back.
  let generation = 0;
  return {
    get(keyHash: string): AgentRecord | null {
      const entry = entries.get(keyHash);
      if (!entry) return null;
      if (entry.until > performance.now()) return entry.agent;
      entries.delete(keyHash);
      return null;
    },
    /** A reader's ticket: `keep` with it stores the answer only if nothing was forgotten since. */
    ticket: () => generation,
    keep(keyHash: string, agent: AgentRecord, ticket: number): void {
      if (ticket !== generation || maxAgeMs <= 0) return;
      if (entries.size >= KEY_CACHE_MAX_ENTRIES) entries.delete(entries.keys().next().value as string);
      entries.set(keyHash, { agent, until: performance.now() + maxAgeMs });
    },
    forget(agentId: string): void {
      generation += 1;
      for (const [keyHash, entry] of entries) if (entry.agent.id === agentId) entries.delete(keyHash);
    },
    forgetAll(): void {
      generation += 1;
      entries.clear();
    },
  };
}

export function createAgentService({ store, clock, knownOperations, operations, identities, keyCacheMaxAgeMs }: AgentServiceDeps) {
  const keys = createKeyCache(keyCacheMaxAgeMs ?? KEY_CACHE_MAX_AGE_MS);

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
    try {
      await store.transaction(async (tx) => {
        await tx.revokeAgent(agent.id, now);
        await tx.appendAudit(
          { type: 'agent.revoked', actor: by.actor, agentId: agent.id, data: { name: agent.name, ...(by.via ? { via: by.via } : {}) } },
          now,
        );
      });
    } finally {
      // Also when the commit's answer was lost: the row may be revoked all the same.
      keys.forget(agent.id);
    }
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
    if (!API_KEY_SHAPE.test(apiKey)) throw new RefusalError('unauthorized', 'unknown_key', 'unknown API key');
    const keyHash = sha256Hex(apiKey);
    const cached = keys.get(keyHash);
    if (cached) return cached;
    const ticket = keys.ticket();
    const agent = await store.findAgentByKeyHash(keyHash);
    if (!agent) throw new RefusalError('unauthorized', 'unknown_key', 'unknown API key');
    if (agent.revokedAt) throw new RefusalError('unauthorized', 'revoked_key', `the API key of agent "${agent.name}" was revoked`);
    keys.keep(keyHash, agent, ticket);
    return agent;
  }

  return {
    create,
    revoke,
    revokeAsPerson,
    revokeRightOf,
    authenticate,
    /** Another replica revoked this agent (its notification): its key is read again on its next request. */
    forgetKeysOf: (agentId: string) => keys.forget(agentId),
    /** Revocations may have been missed (the notifications' connection was lost): every key is read again. */
    forgetAllKeys: () => keys.forgetAll(),
    list: () => store.listAgents(),
  };
}

export type AgentService = ReturnType<typeof createAgentService>;
