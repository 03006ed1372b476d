/**
 * The statements of every cycle (propose → approve → commit) are built once, when the store is made:
 * drizzle renders a query to SQL text in `PgDialect.sqlToQuery`, so every call of it is recorded. The
 * hot statements must each be rendered at start (so the patterns below still describe them), and
 * none again during a cycle. A proposal a rule decides, the fast path, renders nothing at all once
 * its statement's shape has been seen.
 */
import { is, Param, SQL, StringChunk } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Executor } from '../../src/core/executor.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { configYaml, RULE_APPROVED_NOTE } from '../support/operations.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

/** Calls `seen` with every statement drizzle renders, and what it rendered it to (until the mocks are restored). */
function onEveryRender(seen: (query: ReturnType<PgDialect['sqlToQuery']>, statement: SQL) => void): void {
  const render = PgDialect.prototype.sqlToQuery;
  vi.spyOn(PgDialect.prototype, 'sqlToQuery').mockImplementation(function (this: PgDialect, ...args: Parameters<PgDialect['sqlToQuery']>) {
    const query = render.apply(this, args);
    seen(query, args[0]);
    return query;
  });
}

const HOT: Record<string, RegExp> = {
  'agent by key hash': /^select .* from "agents" where "agents"\."key_hash" = \$1$/,
  'proposal with its approvals': /^select .* from "proposals" where "proposals"\."id" = \$1$/s,
  'lock an agent': /^select "id" from "agents" where "agents"\."id" = \$1 for update$/,
  "count an agent's waiting proposals": /^select count\(\*\)::int from \(select 1 from "proposals"/,
  "count an agent's recent proposals": /"proposals"\."created_at" > \$\d+ and "proposals"\."id" <> \$\d+\)$/,
  'lock a proposal': /^select .* from "proposals" where "proposals"\."id" = \$1 for update$/,
  'lock a proposal with its agent': /^select .* from "proposals" left join "agents" .* for update of "proposals"$/s,
  "a proposal's approvals": /^select .* from "approvals" where "approvals"\."proposal_id" = \$1 order by "approvals"\."at" asc$/,
};

describe.each(drivers)('hot statements (%s)', (driver) => {
  const clock = manualClock();
  const echo: Executor = { kind: 'local', run: async (request) => ({ done: request.params }) };
  const rendered: string[] = [];
  let twokey: TestTwokey;
  let agent: { apiKey: string; id: string };

  beforeAll(async () => {
    onEveryRender((query) => rendered.push(query.sql));
    twokey = await startTestTwokey({ driver, clock, executorFor: () => echo });
    agent = await twokey.createAgent('hot');
  }, 180_000);
  afterAll(async () => {
    vi.restoreAllMocks();
    await twokey?.close();
  });

  async function cycle(n: number) {
    const params = { org: `acme-${n}`, plan: 'scale' };
    const auth = await twokey.services.agents.authenticate(agent.apiKey);
    const { proposal, confirmToken } = await twokey.services.proposals.propose(auth, { operation: 'upgrade_plan', params });
    await twokey.services.proposals.approve(proposal.id, { identity: 'web:alice', via: 'test' });
    const committed = await twokey.services.proposals.commit(auth, proposal.id, confirmToken, { operation: 'upgrade_plan', params });
    expect(committed.status).toBe('committed');
  }

  const matching = (texts: string[]) => Object.entries(HOT).filter(([, pattern]) => texts.some((text) => pattern.test(text)));

  it('renders each hot statement before the first cycle, and none of them again in a later one', async () => {
    const atStart = [...rendered];
    expect(matching(atStart).map(([name]) => name)).toEqual(Object.keys(HOT));

    await cycle(1);
    rendered.length = 0;
    await cycle(2);
    const inCycle = [...rendered];
    expect(inCycle.length).toBeGreaterThan(0);
    expect(matching(inCycle).map(([name]) => name)).toEqual([]);
  });
});

/** A leaf of drizzle's SQL: text, a parameter, or a plain value (which drizzle binds as one). */
const isLeaf = (chunk: unknown): boolean => is(chunk, StringChunk) || is(chunk, Param) || typeof chunk !== 'object' || chunk === null;

/**
 * Whether drizzle had to build this statement from its parts (CTEs, identifiers, fragments within
 * fragments) rather than copy a text it already had between its parameters: text and parameters at
 * most one level down.
 */
const builtFromParts = (query: SQL): boolean => !query.queryChunks.every((chunk) => isLeaf(chunk) || (is(chunk, SQL) && chunk.queryChunks.every(isLeaf)));

describe.each(drivers)('the fast path builds no statement (%s)', (driver) => {
  const built: string[] = [];
  let twokey: TestTwokey;
  let agent: { apiKey: string; id: string };

  beforeAll(async () => {
    onEveryRender((query, statement) => {
      if (builtFromParts(statement)) built.push(query.sql);
    });
    twokey = await startTestTwokey({ driver, configYaml: configYaml([RULE_APPROVED_NOTE]) });
    agent = await twokey.createAgent('fast');
  }, 180_000);
  afterAll(async () => {
    vi.restoreAllMocks();
    await twokey?.close();
  });

  const note = async (n: number) => {
    const auth = await twokey.services.agents.authenticate(agent.apiKey);
    const { proposal } = await twokey.services.proposals.propose(auth, { operation: 'note', params: { text: `note ${n}` } });
    expect(proposal.status).toBe('committed');
    return proposal;
  };

  it('sends a proposal a rule approved, run and committed, in a statement whose text it had', async () => {
    await note(1);
    built.length = 0;
    const second = await note(2);
    expect(built).toEqual([]);
    // What it sent is what was committed: the row, as it answered it, and its audit rows.
    const auth = await twokey.services.agents.authenticate(agent.apiKey);
    expect((await twokey.services.proposals.viewForAgent(auth, second.id)).status).toBe('committed');
    const audit = await twokey.services.audit.list({ proposalId: second.id });
    expect(audit.map((event) => event.type)).toEqual(expect.arrayContaining(['proposal.created', 'proposal.approved', 'proposal.committed']));
  });

  it('sends a transaction of added rows alone (as a read-only call records itself, with no BEGIN) in a statement whose text it had', async () => {
    const addRow = (n: number) =>
      twokey.services.store.transaction(async (tx) => {
        await tx.appendAudit({ type: 'agent.created', actor: 'test', agentId: agent.id, data: { n } }, new Date());
      });
    await addRow(1);
    built.length = 0;
    await addRow(2);
    expect(built).toEqual([]);
    const rows = await twokey.services.store.listAudit({ limit: 1000 });
    expect(rows.filter((event) => event.type === 'agent.created' && event.agentId === agent.id).map((event) => event.data)).toEqual(
      expect.arrayContaining([{ n: 1 }, { n: 2 }]),
    );
  });
});
