/**
 * The statements of every cycle (propose → approve → commit) are built once, when the store is made:
 * drizzle renders a query to SQL text in `PgDialect.sqlToQuery`, so every call of it is recorded. The
 * hot statements must each be rendered at start (so the patterns below still describe them), and
 * none again during a cycle.
 */
import { PgDialect } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Executor } from '../../src/core/executor.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const HOT: Record<string, RegExp> = {
  'agent by key hash': /^select .* from "agents" where "agents"\."key_hash" = \$1$/,
  'proposal with its approvals': /^select .* from "proposals" where "proposals"\."id" = \$1$/s,
  'lock an agent': /^select "id" from "agents" where "agents"\."id" = \$1 for update$/,
  "count an agent's waiting proposals": /^select count\(\*\)::int from \(select 1 from "proposals"/,
  "count an agent's recent proposals": /"proposals"\."created_at" > \$\d+ and "proposals"\."id" <> \$\d+\)$/,
  'lock a proposal': /^select .* from "proposals" where "proposals"\."id" = \$1 for update$/,
  'lock a proposal with its agent': /^select .* from "proposals" left join "agents" .* for update of "proposals"$/,
  "a proposal's approvals": /^select .* from "approvals" where "approvals"\."proposal_id" = \$1 order by "approvals"\."at" asc$/,
};

describe.each(drivers)('hot statements (%s)', (driver) => {
  const clock = manualClock();
  const echo: Executor = { kind: 'local', run: async (request) => ({ done: request.params }) };
  const rendered: string[] = [];
  let twokey: TestTwokey;
  let agent: { apiKey: string; id: string };

  beforeAll(async () => {
    const render = PgDialect.prototype.sqlToQuery;
    vi.spyOn(PgDialect.prototype, 'sqlToQuery').mockImplementation(function (this: PgDialect, ...args: Parameters<PgDialect['sqlToQuery']>) {
      const query = render.apply(this, args);
      rendered.push(query.sql);
      return query;
    });
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
