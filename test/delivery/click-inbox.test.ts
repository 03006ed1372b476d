import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { auditEvents } from '../../src/db/schema.js';
import { DISCORD_CLICK_JOB } from '../../src/discord/platform.js';
import { SLACK_CLICK_JOB } from '../../src/slack/platform.js';
import type { JobHandler } from '../../src/core/jobs.js';
import { jobPayloadSchemas } from '../../src/platforms/jobs.js';
import { ALICE, BOB, MALLORY, buttonPress, discordConfigYaml, eventually, modalSubmit, startDiscordTwokey, type DiscordTwokey } from '../discord/helpers.js';
import { RESPONSE_URL, buttonClick, interactionBody, rejectSubmission } from '../slack/support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from '../slack/support/slack-twokey.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { configYaml, deleteWorkspaceOperation, upgradePlanOperation } from '../support/operations.js';

/**
 * The inbox (src/outbox/inbox.ts): a click is a stored job before it is answered. What is stored,
 * that a stored click run again changes nothing more, and that one decided late (its interaction
 * gone) still edits the message through the bot's own API.
 */

const WAIT = { timeout: 10_000, interval: 20 };
const signal = new AbortController().signal;

const SLACK_CONFIG = configYaml([
  upgradePlanOperation({ approvers: ['slack:U0ALICE', 'slack:U0BOB'], quorum: 2, slack: 'C0APPROVALS', commit: 'on_approve', expiresIn: '1h' }),
  deleteWorkspaceOperation({ approvers: ['slack:U0ALICE'], quorum: 1, slack: 'C0APPROVALS', commit: 'on_approve', expiresIn: '1h' }),
]);

type Twokey = SlackTwokey | DiscordTwokey['twokey'];

/** The audit event types of a proposal, every one committed (placed in the chain or not yet). */
async function auditTypes(twokey: Twokey, proposalId: string): Promise<string[]> {
  const rows = await twokey.services.database.db.select({ type: auditEvents.type }).from(auditEvents).where(eq(auditEvents.proposalId, proposalId));
  return rows.map((row) => row.type);
}

const approversOf = async (twokey: Twokey, proposalId: string) => (await twokey.services.store.listApprovals(proposalId)).map((a) => a.approver);

/** A stored click's payload as the outbox hands it to its handler: parsed with its kind's schema. */
const slackClick = (job: { payload: unknown } | undefined) => jobPayloadSchemas['slack.click'].parse(job?.payload);
const discordClick = (job: { payload: unknown } | undefined) => jobPayloadSchemas['discord.click'].parse(job?.payload);

/** The stored clicks (their job rows), newest last. */
async function storedClicks(twokey: Twokey, kind: string) {
  return (await twokey.services.jobs.list({ limit: 1_000 })).filter((job) => job.kind === kind).reverse();
}

describe.each(drivers)('the click inbox with Slack (%s)', (driver) => {
  const clock = manualClock();
  let t: SlackTwokey;
  let decide: JobHandler<'slack.click'>;
  const runs: string[] = [];

  beforeAll(async () => {
    t = await startSlackTwokey({
      driver,
      clock,
      configYaml: SLACK_CONFIG,
      executorFor: () => ({
        kind: 'local',
        run: async (request) => {
          runs.push(request.proposalId);
          return { done: true };
        },
      }),
    });
    decide = t.slack.jobHandlers?.[SLACK_CLICK_JOB] ?? (() => Promise.reject(new Error('no handler')));
  });
  afterAll(() => t?.close());

  const propose = async (operation: string, params: Record<string, unknown>) =>
    (await t.request('POST', '/v1/proposals', { apiKey: t.apiKey, body: { operation, params } })).body.id as string;
  const click = (proposalId: string, userId: string) =>
    t.post(interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId, userId, channel: 'C0APPROVALS' })));

  it('stores who clicked what before answering, and neither the response_url nor the trigger_id', async () => {
    const id = await propose('upgrade_plan', { org: 'acme', plan: 'pro' });
    expect((await click(id, 'U0ALICE')).status).toBe(200);
    const [job] = (await storedClicks(t, SLACK_CLICK_JOB)).filter((row) => row.payload.proposalId === id);
    expect(job?.payload).toEqual({ action: 'approve', proposalId: id, userId: 'U0ALICE', channel: 'C0APPROVALS', receivedAt: clock().toISOString() });
    expect(JSON.stringify(job)).not.toContain('RESPONSEURLSECRET');
    expect(JSON.stringify(job)).not.toContain('trigger');
    // What `twokey jobs list` shows of it: the kind and the proposal, nothing of the click's URLs.
    const listed = await t.services.jobs.list({});
    expect(JSON.stringify(listed)).not.toContain(RESPONSE_URL);
    await vi.waitFor(async () => expect(await approversOf(t, id)).toEqual(['slack:U0ALICE']), WAIT);
  });

  it('a stored approval run again (its process died after deciding it) counts once, and tells nobody anything', async () => {
    const id = await propose('upgrade_plan', { org: 'initech', plan: 'pro' });
    await click(id, 'U0ALICE');
    await t.slack.stop?.(); // waits until the stored click is decided
    const [job] = (await storedClicks(t, SLACK_CLICK_JOB)).filter((row) => row.payload.proposalId === id);
    const ephemerals = t.fake.callsTo('chat.postEphemeral').length;
    await decide(slackClick(job), { signal, attempt: 2, jobId: job?.id ?? 0 });
    await decide(slackClick(job), { signal, attempt: 3, jobId: job?.id ?? 0 });
    expect((await t.services.proposals.get(id)).status).toBe('pending');
    expect(await approversOf(t, id)).toEqual(['slack:U0ALICE']);
    expect(t.fake.callsTo('chat.postEphemeral')).toHaveLength(ephemerals);
  });

  it('a stored approval that completed the quorum, run again, does not run the operation again', async () => {
    const id = await propose('delete_workspace', { workspace: 'w1' });
    await click(id, 'U0ALICE');
    await vi.waitFor(async () => expect((await t.services.proposals.get(id)).status).toBe('committed'), WAIT);
    const [job] = (await storedClicks(t, SLACK_CLICK_JOB)).filter((row) => row.payload.proposalId === id);
    await decide(slackClick(job), { signal, attempt: 2, jobId: job?.id ?? 0 });
    expect(runs.filter((run) => run === id)).toHaveLength(1);
    expect((await auditTypes(t, id)).filter((type) => type === 'proposal.committed')).toHaveLength(1);
  });

  it('a stored rejection run again leaves it rejected once; only a first run tells a refusal', async () => {
    const id = await propose('upgrade_plan', { org: 'umbrella', plan: 'pro' });
    expect((await t.post(interactionBody(rejectSubmission({ proposalId: id, userId: 'U0ALICE', reason: 'no' })))).body).toBe('');
    await vi.waitFor(async () => expect((await t.services.proposals.get(id)).status).toBe('rejected'), WAIT);
    const [job] = (await storedClicks(t, SLACK_CLICK_JOB)).filter((row) => row.payload.proposalId === id);
    expect(job?.payload).toMatchObject({ action: 'reject', reason: 'no', userId: 'U0ALICE' });
    const messages = t.fake.callsTo('chat.postMessage').filter((call) => call.args.channel === 'U0ALICE').length;
    await decide(slackClick(job), { signal, attempt: 2, jobId: job?.id ?? 0 });
    expect(t.fake.callsTo('chat.postMessage').filter((call) => call.args.channel === 'U0ALICE')).toHaveLength(messages);
    expect((await auditTypes(t, id)).filter((type) => type === 'proposal.rejected')).toHaveLength(1);
    // The same stored rejection on its first run (another person's, say) is told, privately.
    await decide({ ...slackClick(job), userId: 'U0BOB' }, { signal, attempt: 1, jobId: job?.id ?? 0 });
    await vi.waitFor(
      () =>
        expect(
          t.fake
            .callsTo('chat.postMessage')
            .filter((call) => call.args.channel === 'U0BOB')
            .at(-1)?.args.text,
        ).toMatch(/rejected/),
      WAIT,
    );
  });

  it('a stored click in a shape twokey never writes is buried at once with the reason, never decided', async () => {
    const [id = 0] = await t.services.jobs.insertMany([{ kind: SLACK_CLICK_JOB, payload: { action: 'approve', proposalId: 42 }, maxAttempts: 12 }], clock());
    await vi.waitFor(async () => {
      const [job] = (await storedClicks(t, SLACK_CLICK_JOB)).filter((row) => row.id === id);
      expect(job).toMatchObject({ status: 'dead', attempts: 1, lastError: expect.stringMatching(/slack\.click job does not fit its schema.*proposalId/) });
    }, WAIT);
  });
});

describe.each(drivers)('the click inbox with Discord (%s)', (driver) => {
  const clock = manualClock();
  let t: DiscordTwokey;
  let decide: JobHandler<'discord.click'>;

  beforeAll(async () => {
    // No checks before an answer: every click is stored, as in a burst, and refused (or not) when decided.
    t = await startDiscordTwokey({ driver, clock, configYaml: discordConfigYaml.replaceAll('expiresIn: 5m', 'expiresIn: 2h'), tuning: { ackBudgetMs: 0 } });
    decide = t.discord.jobHandlers?.[DISCORD_CLICK_JOB] ?? (() => Promise.reject(new Error('no handler')));
  });
  afterAll(() => t?.close());

  const proposeAndPost = async (operation: string, params: Record<string, unknown>) => {
    const { id } = await t.propose(operation, params);
    await eventually(() => expect([...t.fake.messages.values()].some((m) => JSON.stringify(m.body).includes(id))).toBe(true));
    return id;
  };

  it('stores the interaction token only sealed, and nothing that reveals it is listed or logged', async () => {
    const id = await proposeAndPost('rotate_keys', { service: 'billing' });
    const press = buttonPress(`twokey:approve:${id}`, { userId: ALICE });
    expect((await t.interact(press)).body).toEqual({ type: 6 });
    const [job] = (await storedClicks(t.twokey, DISCORD_CLICK_JOB)).filter((row) => row.payload.proposalId === id);
    expect(job?.payload).toMatchObject({
      action: 'approve',
      proposalId: id,
      decider: { identity: `discord:user:${ALICE}`, via: 'discord' },
      interaction: { id: press.id, token: { v: 1, iv: expect.any(String), tag: expect.any(String), data: expect.any(String) } },
    });
    expect(JSON.stringify(job)).not.toContain(press.token);
    expect(JSON.stringify(await t.twokey.services.jobs.list({}))).not.toContain(press.token);
    await t.discord.settle();
    expect(t.twokey.logs.join('')).not.toContain(press.token);
  });

  it('a stored approval run again counts once (quorum 2: still 1 of 2), and the second run tells nothing', async () => {
    const id = await proposeAndPost('rotate_keys', { service: 'search' });
    const press = buttonPress(`twokey:approve:${id}`, { userId: ALICE });
    await t.interact(press);
    await t.discord.settle();
    const [job] = (await storedClicks(t.twokey, DISCORD_CLICK_JOB)).filter((row) => row.payload.proposalId === id);
    const followUps = t.fake.callsTo('POST', /^\/webhooks\//).length;
    await decide(discordClick(job), { signal, attempt: 2, jobId: job?.id ?? 0 });
    expect((await t.twokey.services.proposals.get(id)).status).toBe('pending');
    expect(await approversOf(t.twokey, id)).toEqual([`discord:user:${ALICE}`]);
    expect(t.fake.callsTo('POST', /^\/webhooks\//)).toHaveLength(followUps);
  });

  it('a click decided after its interaction expired still decides and edits the message through the bot, but sends no follow-up', async () => {
    const id = await proposeAndPost('delete_workspace', { workspace: 'late', amount_cents: 100 });
    await t.twokey.outbox.stop(); // the clicks wait in the inbox, as behind a process that died
    const late = buttonPress(`twokey:approve:${id}`, { userId: ALICE });
    const refused = buttonPress(`twokey:approve:${id}`, { userId: MALLORY });
    for (const press of [late, refused]) expect((await t.interact(press)).body).toEqual({ type: 6 });
    clock.advance(16 * 60_000);
    await t.twokey.outbox.runOnce(); // the clicks, decided now
    await t.twokey.outbox.runOnce(); // the message edit their decision queued
    expect((await t.twokey.services.proposals.get(id)).status).toBe('committed');
    expect(t.fake.callsTo('POST', /^\/webhooks\//).filter((call) => call.path.endsWith(refused.token) || call.path.endsWith(late.token))).toEqual([]);
    const message = [...t.fake.messages.values()].find((m) => JSON.stringify(m.body).includes(id));
    expect(JSON.stringify(message?.body)).toContain('Committed');
    expect(t.fake.callsTo('PATCH', /^\/channels\//).at(-1)?.authorization).toMatch(/^Bot /);
    t.twokey.outbox.start();
  });

  it('a submitted reject form is stored with its reason and decided after the answer; a refused one is told privately', async () => {
    const id = await proposeAndPost('delete_workspace', { workspace: 'w2', amount_cents: 100 });
    expect((await t.interact(modalSubmit(`twokey:reject:${id}`, { userId: ALICE }, 'too risky'))).body).toEqual({ type: 6 });
    await t.discord.settle();
    expect(await t.twokey.services.proposals.get(id)).toMatchObject({ status: 'rejected', decisionReason: 'too risky' });
    const again = modalSubmit(`twokey:reject:${id}`, { userId: BOB }, 'me too');
    expect((await t.interact(again)).body).toEqual({ type: 6 });
    await t.discord.settle();
    const [followUp] = t.fake.callsTo('POST', /^\/webhooks\//).filter((call) => call.path.endsWith(again.token));
    expect(followUp?.body).toMatchObject({ flags: 64, content: expect.stringMatching(/not an approver/) });
  });
});
