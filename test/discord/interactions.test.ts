import { REST } from 'discord.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TwokeyError } from '../../src/core/errors.js';
import { jobPayloadSchemas } from '../../src/platforms/jobs.js';
import type { AgentRecord, ProposalRecord } from '../../src/core/model.js';
import { createInteractionHandler, type InteractionReply } from '../../src/discord/interactions.js';
import type { DiscordServices } from '../../src/discord/ports.js';
import { INBOX_UNAVAILABLE_WORDS, InboxUnavailable, type StoredClick } from '../../src/outbox/inbox.js';
import { silentLogger } from '../../src/chat/silent-logger.js';
import { proposalRecord } from '../support/records.js';
import { startFakeDiscord, type FakeDiscord } from './fake-discord.js';
import { ALICE, APPLICATION_ID, GUILD, MALLORY, buttonPress, modalSubmit } from './helpers.js';

const noop = () => {};

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

const BOT_TOKEN = 'unit-test-bot-token';

/**
 * The inbox as the handler sees it: clicks it stores, in order. `decideStored` then runs them as the
 * outbox would (tests with a database use the real one: test/discord/inbox.test.ts).
 */
function memoryInbox() {
  const stored: StoredClick[] = [];
  const inbox: DiscordServices['inbox'] = {
    store: async (click) => stored.push(click),
    wake: noop,
    withdraw: async () => false,
    settle: async () => {},
    guard: (handler) => handler,
  };
  return { inbox, stored };
}

/**
 * Services whose checks (the proposal read) wait until `release()`. Every test answers the click
 * before it releases them, so an answer that arrives at all was given before the checks ran: no
 * wall-clock budget is needed to prove it. Like the core, `approve` refuses someone not on the list.
 */
function slowServices() {
  let release = noop;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const approve = vi.fn(async (_id: string, decider: { identity: string }) => {
    if (decider.identity !== `discord:user:${ALICE}`) throw new TwokeyError('not_an_approver', 'not on the list');
    return { outcome: 'quorum_reached' as const, proposal };
  });
  const { inbox, stored } = memoryInbox();
  const services: DiscordServices = {
    proposals: {
      approve,
      retry: vi.fn(async () => proposal),
      reject: vi.fn(async () => {
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
    inbox,
  };
  return { services, approve, release, stored };
}

describe('Discord interactions when the database is slow', () => {
  let fake: FakeDiscord;
  let rest: REST;

  beforeAll(async () => {
    fake = await startFakeDiscord({ applicationId: APPLICATION_ID });
    rest = new REST({ api: fake.apiUrl, retries: 0 }).setToken('unused');
  });
  afterAll(() => fake.close());

  const handlerFor = (services: DiscordServices, options: { ackBudgetMs: number; burstGapMs?: number }) =>
    createInteractionHandler({ services, rest, logger: () => silentLogger, botToken: BOT_TOKEN, ...options });

  /** The claim the outbox runs a stored click under; the decision completes the job with it. */
  const STORED_CLAIM = { id: 0, lockedBy: 'w_test:1' };

  /** Runs the stored clicks as the outbox would, first attempt each. */
  async function decideStored(handler: ReturnType<typeof handlerFor>, stored: StoredClick[]): Promise<void> {
    for (const click of stored.splice(0)) {
      const payload = jobPayloadSchemas['discord.click'].parse(click.payload);
      await handler.decideClick(payload, { signal: new AbortController().signal, attempt: 1, jobId: 0, claim: STORED_CLAIM });
    }
  }

  const deferredAndStored = (reply: InteractionReply | null) => expect(reply).toMatchObject({ response: { type: 6 }, stored: expect.any(Number) });

  it('stores and acknowledges a click within the budget, then sends the refusal privately once it is decided', async () => {
    const { services, approve, release, stored } = slowServices();
    const handler = handlerFor(services, { ackBudgetMs: 100 });
    const press = buttonPress(`twokey:approve:${proposal.id}`, { userId: MALLORY });
    deferredAndStored(await handler.handle(press));
    expect(stored).toHaveLength(1);
    // What is stored: the decision, and the interaction token only sealed.
    expect(JSON.stringify(stored[0]?.payload)).not.toContain(press.token);
    release();
    await decideStored(handler, stored);
    expect(approve).toHaveBeenCalledTimes(1);
    const [followUp] = fake.callsTo('POST', /^\/webhooks\//).filter((c) => c.path.endsWith(press.token));
    expect(followUp?.body).toMatchObject({ flags: 64, content: expect.stringMatching(/not on the approvers list/) });
  });

  it("decides an approver's stored click with the decider the signed interaction named", async () => {
    const { services, approve, release, stored } = slowServices();
    const handler = handlerFor(services, { ackBudgetMs: 100 });
    deferredAndStored(await handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE })));
    release();
    await decideStored(handler, stored);
    expect(approve).toHaveBeenCalledTimes(1);
    expect(approve).toHaveBeenCalledWith(
      proposal.id,
      { identity: `discord:user:${ALICE}`, memberOf: [`discord:role:${GUILD}`], via: 'discord' },
      { completing: STORED_CLAIM },
    );
  });

  it('answers a click at once while another is still being checked, whatever the budget', async () => {
    const { services, approve, release, stored } = slowServices();
    const handler = handlerFor(services, { ackBudgetMs: 60_000 });
    const lone = handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE }));
    const reads = vi.spyOn(services.store, 'getProposal');
    deferredAndStored(await handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE })));
    // Its checks are left to the core: none of them ran to produce it.
    expect(reads).not.toHaveBeenCalled();
    expect(approve).not.toHaveBeenCalled();
    release();
    deferredAndStored(await lone);
    await decideStored(handler, stored);
    expect(approve).toHaveBeenCalledTimes(2);
  });

  it('answers a click that follows another within the burst gap at once, unchecked', async () => {
    const { services, approve, release, stored } = slowServices();
    const handler = handlerFor(services, { ackBudgetMs: 20, burstGapMs: 60_000 });
    deferredAndStored(await handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE })));
    const reads = vi.spyOn(services.store, 'getProposal');
    deferredAndStored(await handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE })));
    expect(reads).not.toHaveBeenCalled();
    release();
    await decideStored(handler, stored);
    expect(approve).toHaveBeenCalledTimes(2);
  });

  it('stores nothing for the same interaction id twice', async () => {
    const { services, release, stored } = slowServices();
    release();
    const handler = handlerFor(services, { ackBudgetMs: 100 });
    const press = buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE });
    deferredAndStored(await handler.handle(press));
    expect(await handler.handle(press)).toEqual({ response: { type: 6 } });
    expect(stored).toHaveLength(1);
  });

  it('still opens the reject modal, and a slow modal submit is stored and acknowledged with its refusal following', async () => {
    const { services, release, stored } = slowServices();
    const handler = handlerFor(services, { ackBudgetMs: 100 });
    const opened = await handler.handle(buttonPress(`twokey:reject:${proposal.id}`, { userId: ALICE }));
    expect(opened).toMatchObject({ response: { type: 9, data: { custom_id: `twokey:reject:${proposal.id}` } } });

    const submit = modalSubmit(`twokey:reject:${proposal.id}`, { userId: ALICE }, 'no');
    deferredAndStored(await handler.handle(submit));
    expect(stored[0]?.payload).toMatchObject({ action: 'reject', reason: 'no', proposalId: proposal.id });
    release();
    await decideStored(handler, stored);
    const [followUp] = fake.callsTo('POST', /^\/webhooks\//).filter((c) => c.path.endsWith(submit.token));
    expect(followUp?.body).toMatchObject({ flags: 64, content: expect.stringMatching(/already been decided/) });
  });

  it('a lone click whose checks fail (the database is away) is answered privately that twokey cannot reach it, not with an error', async () => {
    const { services } = slowServices();
    const away = new Error('connect ECONNREFUSED 127.0.0.1:5432');
    const unreachable: DiscordServices = {
      ...services,
      store: { getProposal: () => Promise.reject(away), getAgent: () => Promise.reject(away), listApprovals: () => Promise.reject(away) },
      inbox: { ...services.inbox, store: () => Promise.reject(new InboxUnavailable(away.message)) },
      operation: () => ({ name: 'delete_workspace', approval: { approvers: [`discord:user:${ALICE}`] }, grants: { allow: true, durationsMs: [3_600_000] } }),
      grants: { approveAndGrant: vi.fn() },
    };
    const handler = handlerFor(unreachable, { ackBudgetMs: 1_000 });
    const words = { type: 4, data: { content: INBOX_UNAVAILABLE_WORDS, flags: 64 } };
    expect(await handler.handle(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE }))).toMatchObject({ response: words });
    expect(await handler.handle(buttonPress(`twokey:grant:${proposal.id}`, { userId: ALICE }))).toMatchObject({ response: words });
    expect(await handler.handle(modalSubmit(`twokey:reject:${proposal.id}`, { userId: ALICE }, 'no'))).toMatchObject({ response: words });
    // Opening the reject form needs no database: it opens, and its submission is what is refused.
    expect(await handler.handle(buttonPress(`twokey:reject:${proposal.id}`, { userId: ALICE }))).toMatchObject({ response: { type: 9 } });
  });
});
