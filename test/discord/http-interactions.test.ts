import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Executor } from '../../src/core/executor.js';
import { checkDiscordSignature, discordPublicKey } from '../../src/discord/index.js';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import type { StoredMessage } from './fake-discord.js';
import {
  ALICE,
  APPLICATION_ID,
  BOB,
  BOT_TOKEN,
  CAROL,
  CHANNEL,
  MALLORY,
  OPS_ROLE,
  OTHER_ROLE,
  OWNER,
  buttonPress,
  eventually,
  makeSigner,
  modalSubmit,
  startDiscordTwokey,
  type DiscordTwokey,
} from './helpers.js';

/** A local executor that counts runs per proposal and fails while `failuresLeft` > 0. */
function scriptedExecutor() {
  const runs = new Map<string, number>();
  const state = { failuresLeft: 0 };
  const executor: Executor = {
    kind: 'local',
    async run(request) {
      runs.set(request.proposalId, (runs.get(request.proposalId) ?? 0) + 1);
      if (state.failuresLeft > 0) {
        state.failuresLeft -= 1;
        throw new Error('the billing API answered 503');
      }
      return { done: request.params };
    },
  };
  return { runs, state, executorFor: () => executor };
}

function messageOf(t: DiscordTwokey, proposalId: string): StoredMessage | undefined {
  return [...t.fake.messages.values()].find((m) => m.body.nonce === proposalId);
}

function statusOf(t: DiscordTwokey, proposalId: string): string {
  const fields: Array<{ name: string; value: string }> = messageOf(t, proposalId)?.body.embeds[0].fields ?? [];
  return fields.find((f) => f.name === 'Status')?.value ?? '(no message)';
}

const fieldOf = (message: StoredMessage | undefined, name: string): string | undefined =>
  message?.body.embeds[0].fields.find((f: { name: string }) => f.name === name)?.value;

const customIds = (message: StoredMessage | undefined): string[] =>
  (message?.body.components ?? []).flatMap((row: { components: Array<{ custom_id: string }> }) => row.components.map((c) => c.custom_id));

describe.each(drivers)('Discord over HTTP interactions (%s)', (driver) => {
  const executor = scriptedExecutor();
  const tokensUsed: string[] = [];
  let t: DiscordTwokey;

  beforeAll(async () => {
    t = await startDiscordTwokey({ driver, executorFor: executor.executorFor });
  });
  afterAll(() => t.close());

  /** A signed button press through POST /discord/interactions, remembering its token for the log check. */
  function press(action: 'approve' | 'reject' | 'retry', proposalId: string, clicker: { userId: string; roles?: string[] }) {
    const payload = buttonPress(`twokey:${action}:${proposalId}`, clicker);
    tokensUsed.push(payload.token);
    return t.interact(payload);
  }

  async function proposeAndWaitForMessage(operation = 'delete_workspace', params: Record<string, unknown> = { workspace: 'w' }) {
    const proposal = await t.propose(operation, params);
    await eventually(() => expect(messageOf(t, proposal.id)).toBeDefined());
    return proposal;
  }

  it('propose → one channel message with the embed and both buttons, no token in it', async () => {
    const before = t.fake.callsTo('POST', /^\/channels\/\d+\/messages$/).length;
    const { id, confirmToken } = await proposeAndWaitForMessage('delete_workspace', { workspace: 'acme-prod', amount_cents: 125000 });

    const posts = t.fake.callsTo('POST', /^\/channels\/\d+\/messages$/).slice(before);
    expect(posts).toHaveLength(1);
    const [post] = posts;
    expect(post?.path).toBe(`/channels/${CHANNEL}/messages`);
    expect(post?.authorization).toBe(`Bot ${BOT_TOKEN}`);
    const embed = post?.body.embeds[0];
    expect(embed).toMatchObject({ title: 'delete_workspace', description: 'argus wants to delete workspace acme\\-prod.' });
    const fields = Object.fromEntries(embed.fields.map((f: { name: string; value: string }) => [f.name, f.value]));
    expect(fields).toMatchObject({
      Agent: 'argus',
      'Confirmation type': 'verification',
      Cost: '$1,250.00',
      Approvals: '0 of 1',
      Proposal: `\`${id}\``,
    });
    expect(fields.Status).toMatch(/Pending/);
    expect(fields.Expires).toMatch(/^<t:\d+:R>$/);
    expect(post?.body.components).toEqual([
      {
        type: 1,
        components: [
          { type: 2, style: 3, label: 'Approve', custom_id: `twokey:approve:${id}` },
          { type: 2, style: 4, label: 'Reject', custom_id: `twokey:reject:${id}` },
        ],
      },
    ]);
    const sent = JSON.stringify(post?.body);
    expect(sent).not.toContain('tk_conf_');
    expect(sent).not.toContain('tk_agent_');
    expect(sent).not.toContain(confirmToken);
    expect(sent).not.toContain(t.apiKey);
  });

  it("an approver's click by user id commits once, even with 20 concurrent identical interactions", async () => {
    const { id } = await proposeAndWaitForMessage();
    const payload = buttonPress(`twokey:approve:${id}`, { userId: ALICE });
    tokensUsed.push(payload.token);
    // The same interaction 20 times at once, then 20 distinct clicks by the same person.
    const identical = await Promise.all(Array.from({ length: 20 }, () => t.interact(payload)));
    const distinct = await Promise.all(Array.from({ length: 20 }, () => press('approve', id, { userId: ALICE })));
    for (const response of [...identical, ...distinct]) expect(response.status).toBe(200);
    expect(identical.map((r) => r.body.type)).toEqual(Array(20).fill(6));

    await eventually(() => expect(statusOf(t, id)).toMatch(/Committed/));
    await t.discord.settle(); // the decisions still running after their responses
    expect(executor.runs.get(id)).toBe(1);
    const approvals = await t.twokey.services.store.listApprovals(id);
    expect(approvals).toEqual([expect.objectContaining({ approver: `discord:user:${ALICE}`, matchedRule: `discord:user:${ALICE}`, via: 'discord' })]);
    const message = messageOf(t, id);
    expect(customIds(message)).toEqual([]);
    expect(fieldOf(message, 'Approvals')).toBe(`1 of 1: <@${ALICE}>`);
  });

  it("an approver's click by role commits", async () => {
    const { id } = await proposeAndWaitForMessage();
    const response = await press('approve', id, { userId: CAROL, roles: [OTHER_ROLE, OPS_ROLE] });
    expect(response.body).toEqual({ type: 6 });
    await eventually(() => expect(statusOf(t, id)).toMatch(/Committed/));
    expect(executor.runs.get(id)).toBe(1);
    expect(await t.twokey.services.store.listApprovals(id)).toEqual([
      expect.objectContaining({ approver: `discord:user:${CAROL}`, matchedRule: `discord:role:${OPS_ROLE}` }),
    ]);
  });

  it('a non-approver and an owner get an ephemeral refusal, and nothing changes', async () => {
    const { id } = await proposeAndWaitForMessage();
    const edits = t.fake.callsTo('PATCH', /^\/channels\//).length;

    const stranger = await press('approve', id, { userId: MALLORY, roles: [OTHER_ROLE] });
    expect(stranger.body).toMatchObject({ type: 4, data: { flags: 64, content: expect.stringMatching(/not on the approvers list/) } });
    // The owner is on the approvers list too: no self-approval wins.
    const owner = await press('approve', id, { userId: OWNER });
    expect(owner.body).toMatchObject({ type: 4, data: { flags: 64, content: expect.stringMatching(/You own the agent "argus"/) } });
    const ownerReject = await press('reject', id, { userId: OWNER });
    expect(ownerReject.body).toMatchObject({ type: 4, data: { flags: 64 } });
    const strangerModal = await t.interact(modalSubmit(`twokey:reject:${id}`, { userId: MALLORY }, 'no'));
    expect(strangerModal.body).toMatchObject({ type: 4, data: { flags: 64 } });

    await t.discord.settle();
    expect((await t.twokey.services.proposals.get(id)).status).toBe('pending');
    expect(await t.twokey.services.store.listApprovals(id)).toEqual([]);
    expect(t.fake.callsTo('PATCH', /^\/channels\//)).toHaveLength(edits);
  });

  it('quorum 2 shows 1 of 2 in between', async () => {
    const { id } = await proposeAndWaitForMessage('rotate_keys', { service: 'billing' });
    expect(fieldOf(messageOf(t, id), 'Approvals')).toBe('0 of 2');

    expect((await press('approve', id, { userId: ALICE })).body).toEqual({ type: 6 });
    await eventually(() => expect(fieldOf(messageOf(t, id), 'Approvals')).toBe(`1 of 2: <@${ALICE}>`));
    expect(statusOf(t, id)).toMatch(/Pending.*1 of 2/);
    expect(customIds(messageOf(t, id))).toEqual([`twokey:approve:${id}`, `twokey:reject:${id}`]);
    // Alice again: privately told her approval already counts.
    expect((await press('approve', id, { userId: ALICE })).body).toMatchObject({
      type: 4,
      data: { flags: 64, content: expect.stringMatching(/already counted \(1 of 2\)/) },
    });

    expect((await press('approve', id, { userId: BOB })).body).toEqual({ type: 6 });
    await eventually(() => expect(statusOf(t, id)).toMatch(/Committed/));
    expect(fieldOf(messageOf(t, id), 'Approvals')).toBe(`2 of 2: <@${ALICE}>, <@${BOB}>`);
  });

  it('reject opens a modal; its submit rejects with the reason, which reaches the agent and the message', async () => {
    const { id } = await proposeAndWaitForMessage();
    const opened = await press('reject', id, { userId: ALICE });
    expect(opened.body).toMatchObject({ type: 9, data: { custom_id: `twokey:reject:${id}`, title: 'Reject delete_workspace' } });
    expect(JSON.stringify(opened.body.data.components)).toContain('"custom_id":"reason"');

    const submit = modalSubmit(`twokey:reject:${id}`, { userId: ALICE }, 'Not during the freeze.');
    tokensUsed.push(submit.token);
    expect((await t.interact(submit)).body).toEqual({ type: 6 });

    // Stored before the answer, decided right after it.
    await t.discord.settle();
    const seen = await t.twokey.request('GET', `/v1/proposals/${id}`, { apiKey: t.apiKey });
    expect(seen.body).toMatchObject({ status: 'rejected', decision: { by: `discord:user:${ALICE}`, reason: 'Not during the freeze.' } });
    await eventually(() => expect(statusOf(t, id)).toBe(`❌ **Rejected** by <@${ALICE}>: Not during the freeze.`));
    expect(customIds(messageOf(t, id))).toEqual([]);
    // A late approval of a rejected proposal is refused privately.
    expect((await press('approve', id, { userId: ALICE })).body).toMatchObject({ type: 4, data: { flags: 64 } });
  });

  it('an executor failure edits the message with a Retry button, and Retry commits', async () => {
    const { id } = await proposeAndWaitForMessage();
    executor.state.failuresLeft = 2;
    expect((await press('approve', id, { userId: ALICE })).body).toEqual({ type: 6 });
    await eventually(() => expect(statusOf(t, id)).toMatch(/Execution failed.*the billing API answered 503/s));
    const failed = messageOf(t, id);
    expect(failed?.body.components).toEqual([{ type: 1, components: [{ type: 2, style: 1, label: 'Retry', custom_id: `twokey:retry:${id}` }] }]);

    // Non-approvers cannot retry either.
    expect((await press('retry', id, { userId: MALLORY })).body).toMatchObject({ type: 4, data: { flags: 64 } });

    // A retry that fails again is reported privately, through the interaction's follow-up webhook,
    // and that webhook failing too is only logged.
    t.fake.scriptNext('POST', /^\/webhooks\//, { status: 404, body: { message: 'Unknown Webhook', code: 10015 } });
    const before = t.fake.callsTo('POST', /^\/webhooks\//).length;
    expect((await press('retry', id, { userId: ALICE })).body).toEqual({ type: 6 });
    await eventually(() => expect(t.fake.callsTo('POST', /^\/webhooks\//).length).toBe(before + 1));
    const followUp = t.fake.callsTo('POST', /^\/webhooks\//).at(-1);
    expect(followUp?.path).toMatch(new RegExp(`^/webhooks/${APPLICATION_ID}/itok-`));
    expect(followUp?.body).toMatchObject({ flags: 64, content: expect.stringMatching(/failed.*Retry/) });
    expect(followUp?.authorization).toBeUndefined();
    await eventually(() => expect(t.twokey.logs.join('')).toContain('Discord follow-up message failed'));

    expect((await press('retry', id, { userId: CAROL, roles: [OPS_ROLE] })).body).toEqual({ type: 6 });
    await eventually(() => expect(statusOf(t, id)).toMatch(/Committed/));
    expect(executor.runs.get(id)).toBe(3);
    expect(customIds(messageOf(t, id))).toEqual([]);
    const view = await t.twokey.request('GET', `/v1/proposals/${id}`, { apiKey: t.apiKey });
    expect(view.body).toMatchObject({ status: 'committed', result: { done: { workspace: 'w' } } });
  });

  it('PING → {type:1}', async () => {
    expect(await t.interact({ type: 1, id: '1', application_id: APPLICATION_ID, token: 'x', version: 1 })).toEqual({ status: 200, body: { type: 1 } });
  });

  it('bad signature, tampered body, stale and future timestamps → 401 with no body, and nothing changes', async () => {
    const { id } = await proposeAndWaitForMessage();
    const payload = buttonPress(`twokey:approve:${id}`, { userId: ALICE });
    tokensUsed.push(payload.token);
    const body = JSON.stringify(payload);
    const now = Math.floor(Date.now() / 1000);
    const post = (headers: Record<string, string>, sent = body) =>
      t.twokey.app.inject({ method: 'POST', url: '/discord/interactions', headers, payload: sent });

    const impostor = makeSigner();
    const bad = await post(impostor.headers(body, now));
    const tampered = await post(t.signer.headers(body, now), body.replace(ALICE, MALLORY));
    // Six minutes off (the exact 299/301 s boundaries are pinned with a fixed clock in the unit tests).
    const stale = await post(t.signer.headers(body, now - 360));
    const future = await post(t.signer.headers(body, now + 360));
    const unsigned = await post({ 'content-type': 'application/json' });
    const garbled = await post({ ...t.signer.headers(body, now), 'x-signature-ed25519': 'zz' });
    for (const response of [bad, tampered, stale, future, unsigned, garbled]) {
      expect(response.statusCode).toBe(401);
      expect(response.body).toBe('');
    }
    await t.discord.settle();
    expect((await t.twokey.services.proposals.get(id)).status).toBe('pending');
    expect(await t.twokey.services.store.listApprovals(id)).toEqual([]);
  });

  it('Discord answering 429 with retry_after → the message still arrives', async () => {
    t.fake.scriptNext('POST', /^\/channels\/\d+\/messages$/, {
      status: 429,
      headers: { 'retry-after': '1', 'x-ratelimit-scope': 'user', 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset-after': '1' },
      body: { message: 'You are being rate limited.', retry_after: 0.8, global: false },
    });
    const before = t.fake.callsTo('POST', /^\/channels\/\d+\/messages$/).length;
    const { id } = await t.propose('delete_workspace', { workspace: 'rate-limited' });
    await eventually(() => expect(messageOf(t, id)).toBeDefined(), { timeout: 10_000 });
    // The 429, then the same post sent again after the wait.
    expect(t.fake.callsTo('POST', /^\/channels\/\d+\/messages$/).length - before).toBe(2);
    await eventually(() => expect(t.twokey.logs.join('')).toContain('Discord rate limit'));
  });

  it('a long Retry-After, a timeout and a missing channel reach the outbox as DeliveryErrors it can act on', async () => {
    const { id } = await proposeAndWaitForMessage();
    const proposal = await t.twokey.services.proposals.get(id);
    const view = await t.twokey.chatSync.buildView(proposal, await t.twokey.services.store.getAgent(proposal.agentId));

    t.fake.scriptNext('POST', /^\/channels\/\d+\/messages$/, {
      status: 429,
      headers: { 'retry-after': '120', 'x-ratelimit-scope': 'shared' },
      body: { message: 'You are being rate limited.', retry_after: 120, global: false },
    });
    // The publisher hands a long Retry-After to the outbox instead of sleeping through it: one request, no retry.
    const postsBefore = t.fake.callsTo('POST', /^\/channels\/\d+\/messages$/).length;
    await expect(t.discord.publisher.post(CHANNEL, view)).rejects.toMatchObject({ name: 'DeliveryError', options: { retryAfterMs: expect.any(Number) } });
    expect(t.fake.callsTo('POST', /^\/channels\/\d+\/messages$/)).toHaveLength(postsBefore + 1);

    t.fake.scriptNext('POST', /^\/channels\/\d+\/messages$/, { status: 404, body: { message: 'Unknown Channel', code: 10003 } });
    await expect(t.discord.publisher.post('1299999999999999999', view)).rejects.toMatchObject({ options: { permanent: true } });
    t.fake.scriptNext('PATCH', /^\/channels\//, { status: 403, body: { message: 'Missing Access', code: 50001 } });
    await expect(t.discord.publisher.update({ channel: CHANNEL, messageId: '1299999999999999998' }, view)).rejects.toMatchObject({
      options: { permanent: true },
    });
    t.fake.scriptNext('PATCH', /^\/channels\//, { status: 502, body: { message: 'Bad Gateway', code: 0 } });
    await expect(t.discord.publisher.update({ channel: CHANNEL, messageId: '1299999999999999998' }, view)).rejects.toMatchObject({
      name: 'DeliveryError',
      options: {},
    });
  });

  it('logs hold no bot token and no interaction token', async () => {
    const logs = t.twokey.logs.join('');
    expect(logs.length).toBeGreaterThan(0);
    expect(tokensUsed.length).toBeGreaterThan(10);
    expect(logs).not.toContain(BOT_TOKEN);
    for (const token of tokensUsed) expect(logs).not.toContain(token);
    expect(logs).not.toContain('itok-');
  });
});

describe.each(drivers)('Discord message on expiry (%s)', (driver) => {
  const clock = manualClock(new Date());
  let t: DiscordTwokey;

  beforeAll(async () => {
    t = await startDiscordTwokey({ driver, clock });
  });
  afterAll(() => t.close());

  it('expiry edits the message and removes the buttons; a late click is refused privately', async () => {
    const { id } = await t.propose('delete_workspace', { workspace: 'w' });
    await eventually(() => expect(messageOf(t, id)).toBeDefined());
    clock.advance(5 * 60_000 + 1);
    const late = buttonPress(`twokey:approve:${id}`, { userId: ALICE });
    expect((await t.interact(late)).body).toMatchObject({ type: 4, data: { flags: 64, content: expect.stringMatching(/expired/) } });

    expect(await t.twokey.services.proposals.expireDue()).toBe(1);
    await eventually(() => expect(statusOf(t, id)).toMatch(/Expired/));
    expect(customIds(messageOf(t, id))).toEqual([]);
    expect(messageOf(t, id)?.body.embeds[0].color).toBe(0x95a5a6);
  });
});

describe('Discord signature check (pure)', () => {
  const signer = makeSigner();
  const key = discordPublicKey(signer.publicKeyHex);
  const body = Buffer.from('{"type":1}');
  const now = new Date('2026-11-22T10:00:00.000Z');
  const at = (skewSeconds: number) => Math.floor(now.getTime() / 1000) + skewSeconds;
  const check = (timestamp: number, sent = body) => {
    const headers = signer.headers(body.toString(), timestamp);
    return checkDiscordSignature(key, { signature: headers['x-signature-ed25519'], timestamp: headers['x-signature-timestamp'], rawBody: sent }, now);
  };

  it('accepts 299 s either way and refuses 301 s either way', async () => {
    expect(await check(at(-299))).toBe('ok');
    expect(await check(at(299))).toBe('ok');
    expect(await check(at(-301))).toBe('stale');
    expect(await check(at(301))).toBe('future');
  });

  it('refuses a signature over other bytes, or a missing one', async () => {
    expect(await check(at(0), Buffer.from('{"type":2}'))).toBe('invalid');
    expect(await checkDiscordSignature(key, { signature: undefined, timestamp: String(at(0)), rawBody: body }, now)).toBe('missing');
    expect(await checkDiscordSignature(key, { signature: 'ab', timestamp: String(at(0)), rawBody: body }, now)).toBe('malformed');
    expect(() => discordPublicKey('not-hex')).toThrow(/64 hexadecimal/);
  });
});
