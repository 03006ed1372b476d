import { REST } from 'discord.js';
import type { FastifyBaseLogger } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TwokeyError } from '../../src/core/errors.js';
import type { AgentRecord, ProposalRecord } from '../../src/core/model.js';
import { createInteractionHandler } from '../../src/discord/interactions.js';
import type { DiscordServices } from '../../src/discord/ports.js';
import { proposalRecord } from '../support/records.js';
import { startFakeDiscord, type FakeDiscord } from './fake-discord.js';
import { ALICE, APPLICATION_ID, GUILD, MALLORY, buttonPress, modalSubmit } from './helpers.js';

const noop = () => {};
const silent: FastifyBaseLogger = {
  level: 'silent',
  fatal: noop,
  error: noop,
  warn: noop,
  info: noop,
  debug: noop,
  trace: noop,
  silent: noop,
  child: () => silent,
};

const now = new Date();
const proposal: ProposalRecord = proposalRecord({ id: 'prp_slowslowslowslow', createdAt: now });
const agent: AgentRecord = {
  id: 'agt_1',
  name: 'argus',
  keyHash: 'h',
  keyPrefix: 'p',
  callbackSecret: 's',
  owners: [],
  operations: null,
  createdAt: now,
  revokedAt: null,
};

/** Plain fakes whose database reads hang until `release()`: a database too slow for Discord's 3 seconds. */
/**
 * Services whose checks (the proposal read, a reject) wait until `release()`. Every test answers
 * the click before it releases them, so an answer that arrives at all was given before the checks
 * ran: no wall-clock budget is needed to prove it.
 */
function slowServices() {
  let release = noop;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const approve = vi.fn(async () => ({ outcome: 'quorum_reached' as const, proposal }));
  const services: DiscordServices = {
    proposals: {
      approve,
      retry: vi.fn(async () => proposal),
      reject: vi.fn(async () => {
        await gate;
        throw new TwokeyError('not_pending', 'already decided');
      }),
    },
    store: {
      getProposal: async () => {
        await gate;
        return proposal;
      },
      getAgent: async () => agent,
      listApprovals: async () => [],
    },
    operation: () => ({ name: 'delete_workspace', approval: { approvers: [`discord:user:${ALICE}`] } }),
    clock: () => new Date(),
  };
  return { services, approve, release };
}

describe('Discord interactions when the database is slow', () => {
  let fake: FakeDiscord;
  let rest: REST;

  beforeAll(async () => {
    fake = await startFakeDiscord({ applicationId: APPLICATION_ID });
    rest = new REST({ api: fake.apiUrl, retries: 0 }).setToken('unused');
  });
  afterAll(() => fake.close());

  it('acknowledges a click within the budget, then sends the refusal privately once the checks finish', async () => {
    const { services, approve, release } = slowServices();
    const handler = createInteractionHandler({ services, rest, logger: () => silent, ackBudgetMs: 100 });
    const press = buttonPress(`twokey:approve:${proposal.id}`, { userId: MALLORY });
    const reply = await handler.handle(press);
    expect(reply).toMatchObject({ response: { type: 6 } });
    if (reply) handler.runAfter(reply);
    release();
    await handler.drain();
    expect(approve).not.toHaveBeenCalled();
    const [followUp] = fake.callsTo('POST', /^\/webhooks\//).filter((c) => c.path.endsWith(press.token));
    expect(followUp?.body).toMatchObject({ flags: 64, content: expect.stringMatching(/not on the approvers list/) });
  });

  it("runs an approver's decision after the late checks pass", async () => {
    const { services, approve, release } = slowServices();
    const handler = createInteractionHandler({ services, rest, logger: () => silent, ackBudgetMs: 100 });
    const reply = await handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE }));
    expect(reply).toMatchObject({ response: { type: 6 } });
    if (reply) handler.runAfter(reply);
    release();
    await handler.drain();
    expect(approve).toHaveBeenCalledTimes(1);
    expect(approve).toHaveBeenCalledWith(proposal.id, { identity: `discord:user:${ALICE}`, memberOf: [`discord:role:${GUILD}`], via: 'discord' });
  });

  it('answers a click at once while another is still being checked, whatever the budget, and decides it afterwards', async () => {
    const { services, approve, release } = slowServices();
    const handler = createInteractionHandler({ services, rest, logger: () => silent, ackBudgetMs: 60_000 });
    const lone = handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE }));
    const reads = vi.spyOn(services.store, 'getProposal');
    const second = await handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE }));
    expect(second).toMatchObject({ response: { type: 6 } });
    // Its checks wait until after its answer: none of them ran to produce it.
    expect(reads).not.toHaveBeenCalled();
    if (second) handler.runAfter(second);
    expect(approve).not.toHaveBeenCalled();
    release();
    const first = await lone;
    expect(first).toMatchObject({ response: { type: 6 } });
    if (first) handler.runAfter(first);
    await handler.drain();
    expect(approve).toHaveBeenCalledTimes(2);
  });

  it('answers a click that follows another within the burst gap at once, its checks after the answer', async () => {
    const { services, approve, release } = slowServices();
    const handler = createInteractionHandler({ services, rest, logger: () => silent, ackBudgetMs: 20, burstGapMs: 60_000 });
    const first = await handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE }));
    const reads = vi.spyOn(services.store, 'getProposal');
    const next = await handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE }));
    expect(next).toMatchObject({ response: { type: 6 } });
    expect(reads).not.toHaveBeenCalled();
    for (const reply of [first, next]) if (reply) handler.runAfter(reply);
    release();
    await handler.drain();
    expect(reads).toHaveBeenCalled();
    expect(approve).toHaveBeenCalledTimes(2);
  });

  it('holds a decision within the burst gap of the last click until it has waited maxDecisionDelayMs, and runs it at once when quiet', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const decided = async (burstGapMs: number) => {
        const { services, approve, release } = slowServices();
        release();
        const handler = createInteractionHandler({ services, rest, logger: () => silent, ackBudgetMs: 1_000, burstGapMs, maxDecisionDelayMs: 1_500 });
        const reply = await handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE }));
        if (reply) handler.runAfter(reply);
        return { approve, drain: () => handler.drain() };
      };
      const busy = await decided(60_000);
      await vi.advanceTimersByTimeAsync(1_499);
      expect(busy.approve).not.toHaveBeenCalled();
      await vi.advanceTimersByTimeAsync(1);
      await busy.drain();
      expect(busy.approve).toHaveBeenCalledTimes(1);

      const quiet = await decided(0);
      await vi.advanceTimersByTimeAsync(0);
      await quiet.drain();
      expect(quiet.approve).toHaveBeenCalledTimes(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('still opens the reject modal, and a slow modal submit is acknowledged with its refusal following', async () => {
    const { services, release } = slowServices();
    const handler = createInteractionHandler({ services, rest, logger: () => silent, ackBudgetMs: 100 });
    const opened = await handler.handle(buttonPress(`twokey:reject:${proposal.id}`, { userId: ALICE }));
    expect(opened).toMatchObject({ response: { type: 9, data: { custom_id: `twokey:reject:${proposal.id}` } } });

    const submit = modalSubmit(`twokey:reject:${proposal.id}`, { userId: ALICE }, 'no');
    const reply = await handler.handle(submit);
    expect(reply).toMatchObject({ response: { type: 6 } });
    if (reply) handler.runAfter(reply);
    release();
    await handler.drain();
    const [followUp] = fake.callsTo('POST', /^\/webhooks\//).filter((c) => c.path.endsWith(submit.token));
    expect(followUp?.body).toMatchObject({ flags: 64, content: expect.stringMatching(/already been decided/) });
  });
});
