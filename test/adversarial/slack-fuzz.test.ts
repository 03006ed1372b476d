import fc from 'fast-check';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ChatIntegration } from '../../src/chat/types.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { configYaml, upgradePlanOperation } from '../support/operations.js';
import type { FakeSlack } from '../slack/support/fake-slack.js';
import { SIGNING_SECRET, buttonClick, interactionBody, rejectSubmission, slackHeaders } from '../slack/support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from '../slack/support/slack-twokey.js';

const CONFIG = configYaml([
  upgradePlanOperation({ approvers: ['slack:U0ALICE', 'slack:U0OWNER', 'slack:group:S0OPS'], quorum: 1, slack: 'C0APPROVALS', commit: 'on_approve' }),
]);

/** The only people whose click could change anything: a named approver and a member of the approving group. */
const DECIDERS = ['U0ALICE', 'U0OPSPERSON'];

/**
 * Property-based fuzzing of `POST /slack/events`: whatever arrives, signed or not, the answer is
 * never a 5xx, the process keeps serving, and nothing but a genuine approver's click on a real
 * pending proposal changes the database.
 */
describe.each(drivers)('Slack events under fuzzing (%s)', (driver) => {
  const clock = manualClock();
  let fake: FakeSlack;
  let twokey: SlackTwokey;
  let slack: ChatIntegration | undefined;
  let pendingId: string;
  let rejectedId: string;

  beforeAll(async () => {
    twokey = await startSlackTwokey({ driver, clock, configYaml: CONFIG, agent: { name: 'billing-bot', owners: ['slack:U0OWNER'] } });
    ({ fake, slack } = twokey);
    fake.usergroups.set('S0OPS', ['U0OPSPERSON']);
    const { apiKey } = twokey;
    const propose = async (org: string) =>
      (await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org, plan: 'pro' } } })).body.id as string;
    pendingId = await propose('acme');
    rejectedId = await propose('initech');
    await twokey.services.proposals.reject(rejectedId, { identity: 'slack:U0ALICE', via: 'slack' }, 'no');
    // The outbox posts and edits the messages in the background; fuzzing starts once it is idle.
    await vi.waitFor(async () => expect(await queryRow(sql`select count(*) filter (where status <> 'done')::int as n from jobs`)).toEqual({ n: 0 }), {
      timeout: 10_000,
      interval: 50,
    });
  });
  afterAll(() => twokey?.close());

  async function queryRow(query: ReturnType<typeof sql>): Promise<unknown> {
    const result = await twokey.services.database.db.execute(query);
    const rows = Array.isArray(result) ? result : (result as { rows: unknown[] }).rows;
    return rows[0];
  }

  const snapshot = async () =>
    JSON.stringify(
      await queryRow(sql`
        select (select count(*) from proposals)::int as proposals,
               (select count(*) from approvals)::int as approvals,
               (select count(*) from audit_events)::int as audit,
               -- A click is stored before it is answered (the inbox): its own job is not a change it made.
               (select count(*) from jobs where kind <> 'slack.click')::int as jobs,
               (select count(*) from chat_messages)::int as messages,
               (select string_agg(status || coalesce(consumed_at::text, ''), ',' order by id) from proposals) as states`),
    );

  /** Clicks are decided after their ack; waits for that work so a late state change is seen. */
  async function settled(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    // Over HTTP, stop() only waits for the clicks still being decided.
    if (!slack?.stop) throw new Error('the Slack integration has no stop()');
    await slack.stop();
  }

  const post = (payload: string, headers: Record<string, string>) => twokey.app.inject({ method: 'POST', url: '/slack/events', headers, payload });
  const nowSeconds = () => Math.floor(clock().getTime() / 1000);

  /** Any string, NUL and lone surrogates included (what PostgreSQL refuses to store). */
  const text = (maxLength: number) =>
    fc.oneof(fc.string({ maxLength }), fc.string({ unit: 'binary', maxLength }), fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfff'));
  /** Anything in a field that is usually an object (user, channel, view…). */
  const oddValue = () =>
    fc.oneof(fc.constant(undefined), fc.constant(null), fc.jsonValue({ maxDepth: 2 }), fc.jsonValue({ maxDepth: 2, stringUnit: 'binary' }));

  const proposalIds = () =>
    fc.oneof(
      fc.constant(pendingId),
      fc.constant(rejectedId),
      fc.constant(`${pendingId} `),
      fc.constant(pendingId.toUpperCase()),
      text(40).map((junk) => `prp_${junk}`),
      text(3000),
    );

  const notADecider = () =>
    fc.oneof(
      fc.constantFrom('U0MALLORY', 'U0OWNER', 'u0alice', ' U0ALICE', 'U0ALICE\u0000', 'slack:U0ALICE', 'S0OPS', 'group:S0OPS', 'U0OPSPERSON\n', ''),
      text(30).filter((id) => !DECIDERS.includes(id)),
    );

  /** Half the time, up to `max` fields of `record` replaced by odd values (undefined drops the field from the JSON). */
  const mutated = <T extends Record<string, unknown>>(record: T, keys: string[], max = 2) =>
    fc
      .oneof(fc.constant([]), fc.array(fc.tuple(fc.constantFrom(...keys), oddValue()), { minLength: 1, maxLength: max }))
      .map((changes) => ({ ...record, ...Object.fromEntries(changes) }));

  /** Mostly the real thing, sometimes not. */
  const usually = <T, U>(real: fc.Arbitrary<T>, other: fc.Arbitrary<U>): fc.Arbitrary<T | U> =>
    fc.oneof({ arbitrary: real, weight: 4 }, { arbitrary: other, weight: 1 });

  const blockActions = () =>
    fc
      .record({
        actionId: usually(fc.constantFrom('twokey_approve', 'twokey_reject', 'twokey_retry'), text(30)),
        value: usually(proposalIds(), oddValue()),
        userId: notADecider(),
        extraActions: fc.array(oddValue(), { maxLength: 2 }),
      })
      .chain(({ actionId, value, userId, extraActions }) => {
        const click = buttonClick({ actionId, proposalId: '', userId });
        const [action] = click.actions;
        return mutated({ ...action, value }, ['action_id', 'value', 'type', 'block_id'], 1).chain((first) =>
          mutated({ ...click, actions: [first, ...extraActions] }, Object.keys(click)),
        );
      });

  const viewSubmission = () =>
    fc
      .record({
        metadata: usually(proposalIds(), oddValue()),
        userId: notADecider(),
        reason: usually(text(600), oddValue()),
      })
      .chain(({ metadata, userId, reason }) => {
        const submission = rejectSubmission({ proposalId: '', userId });
        const values = { twokey_reason: { twokey_reason_input: { type: 'plain_text_input', value: reason } } };
        return mutated(
          { ...submission.view, private_metadata: metadata, state: { values } },
          ['callback_id', 'state', 'private_metadata', 'type', 'id'],
          1,
        ).chain((view) => mutated({ ...submission, view }, Object.keys(submission), 1));
      });

  const randomlyTyped = () =>
    fc
      .tuple(
        fc.oneof(
          fc.constantFrom(
            'block_actions',
            'view_submission',
            'view_closed',
            'shortcut',
            'message_action',
            'event_callback',
            'url_verification',
            'app_rate_limited',
          ),
          text(20),
          oddValue(),
        ),
        fc.dictionary(text(12), oddValue(), { maxKeys: 6 }),
      )
      .map(([type, rest]) => ({ ...rest, type }));

  const form = 'application/x-www-form-urlencoded';
  /** A signed request: [body, content type]. */
  const signedBodies = () =>
    fc.oneof(
      fc.jsonValue().map((value) => [`payload=${encodeURIComponent(JSON.stringify(value))}`, form] as const),
      blockActions().map((payload) => [interactionBody(payload), form] as const),
      viewSubmission().map((payload) => [interactionBody(payload), form] as const),
      randomlyTyped().map((payload) => [interactionBody(payload), form] as const),
      fc.string({ maxLength: 200 }).map((text) => [`payload=${encodeURIComponent(text)}`, form] as const),
      text(200).map((raw) => [raw, form] as const),
      fc
        .constantFrom('payload=%00', 'payload=%ED%A0%80', 'payload=%7B%22type%22%3A%22block_actions%22%2C%22actions%22%3A%5B%5D%7D%zz')
        .map((raw) => [raw, form] as const),
      fc.dictionary(text(10), text(40)).map((fields) => [new URLSearchParams(fields).toString(), form] as const),
      fc
        .oneof(
          fc.record({ type: fc.constant('url_verification'), challenge: oddValue(), token: oddValue() }, { requiredKeys: ['type'] }),
          fc.record({ type: fc.constant('event_callback'), event: oddValue(), team_id: oddValue(), event_id: oddValue() }, { requiredKeys: ['type'] }),
          fc.record({ ssl_check: oddValue(), token: oddValue() }),
          randomlyTyped(),
          fc.jsonValue(),
        )
        .map((value) => [JSON.stringify(value) ?? '', 'application/json'] as const),
      text(200).map((raw) => [raw, 'application/json'] as const),
    );

  it('never answers 5xx to a signed but malformed request, and changes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(signedBodies(), fc.boolean(), fc.integer({ min: -300, max: 300 }), async ([payload, contentType], charset, skew) => {
        const before = await snapshot();
        const response = await post(payload, {
          'content-type': charset ? `${contentType}; charset=utf-8` : contentType,
          ...slackHeaders(payload, nowSeconds() + skew),
        });
        expect(response.statusCode, payload).toBeLessThan(500);
        await settled();
        expect(await snapshot(), payload).toBe(before);
      }),
      { numRuns: 300 },
    );
    expect((await twokey.request('GET', '/healthz')).status).toBe(200);
  }, 120_000);

  it("answers an approver's clicks that cannot decide anything without changing anything", async () => {
    // A named approver and a group member, on what they may not decide: the Reject button (it only
    // opens the modal), a retry of something not failed, a decided or unknown proposal.
    const unknownIds = fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789_-'), minLength: 1, maxLength: 40 }).map((id) => `prp_${id}`);
    const inert = fc.oneof(
      fc.tuple(fc.constant('twokey_reject'), fc.constantFrom(pendingId, rejectedId)),
      fc.tuple(fc.constant('twokey_retry'), fc.oneof(fc.constantFrom(pendingId, rejectedId), unknownIds)),
      fc.tuple(fc.constant('twokey_approve'), fc.oneof(fc.constant(rejectedId), unknownIds)),
      fc.tuple(fc.constant('modal'), fc.oneof(fc.constant(rejectedId), unknownIds)),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...DECIDERS), inert, text(100), async (userId, [action, id], reason) => {
        const before = await snapshot();
        const opened = fake.callsTo('views.open').length;
        const payload = interactionBody(
          action === 'modal' ? rejectSubmission({ proposalId: id, userId, reason }) : buttonClick({ actionId: action, proposalId: id, userId }),
        );
        const response = await post(payload, { 'content-type': form, ...slackHeaders(payload, nowSeconds()) });
        expect(response.statusCode).toBe(200);
        await settled();
        expect(await snapshot()).toBe(before);
        // Only the Reject button on the pending proposal opens the modal; everything else is refused.
        expect(fake.callsTo('views.open').length - opened).toBe(action === 'twokey_reject' && id === pendingId ? 1 : 0);
      }),
      { numRuns: 100 },
    );
  }, 120_000);

  const genuineClick = () => interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId: pendingId, userId: 'U0ALICE' }));

  /** What arrives without a valid signature: missing, malformed, for another secret, another body or another time. */
  const badSignatures = () =>
    fc.oneof(
      fc.constant(() => ({})),
      fc.string({ maxLength: 80 }).map((signature) => () => ({ 'x-slack-signature': signature })),
      fc.string({ maxLength: 20 }).map((timestamp) => () => ({ 'x-slack-request-timestamp': timestamp })),
      fc.tuple(fc.string({ maxLength: 20 }), fc.string({ maxLength: 80 })).map(([timestamp, signature]) => () => ({
        'x-slack-request-timestamp': timestamp,
        'x-slack-signature': signature,
      })),
      fc.string({ maxLength: 40 }).map((secret) => (body: string) => slackHeaders(body, nowSeconds(), secret === SIGNING_SECRET ? `${secret}x` : secret)),
      fc.string({ minLength: 1, maxLength: 40 }).map((extra) => (body: string) => slackHeaders(`${body}${extra}`, nowSeconds())),
      // Replays: a valid signature, more than 5 minutes off in either direction.
      fc.integer({ min: 301, max: 10_000_000 }).map((age) => (body: string) => slackHeaders(body, nowSeconds() - age)),
      fc.integer({ min: 301, max: 10_000_000 }).map((ahead) => (body: string) => slackHeaders(body, nowSeconds() + ahead)),
      // Upper-case hex, or the signature of another timestamp sent with this one.
      fc.constant((body: string) => {
        const headers = slackHeaders(body, nowSeconds());
        return { ...headers, 'x-slack-signature': headers['x-slack-signature']?.toUpperCase() ?? '' };
      }),
      fc.constant((body: string) => ({ ...slackHeaders(body, nowSeconds() - 1), 'x-slack-request-timestamp': String(nowSeconds()) })),
    );

  it('refuses every request without a valid, fresh signature with a bare 401, and changes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(
        // The genuine approver's click on the pending proposal is in the mix: unsigned, it must not count.
        fc.oneof(
          fc.constant(genuineClick()),
          text(300),
          signedBodies().map(([body]) => body),
        ),
        fc.constantFrom('application/x-www-form-urlencoded', 'application/json', 'application/x-www-form-urlencoded; charset=utf-8'),
        badSignatures(),
        async (payload, contentType, headersFor) => {
          const before = await snapshot();
          const response = await post(payload, { 'content-type': contentType, ...headersFor(payload) });
          expect(response.statusCode, payload).toBe(401);
          expect(response.body).toBe('');
          await settled();
          expect(await snapshot()).toBe(before);
        },
      ),
      { numRuns: 200 },
    );
  }, 120_000);

  it('answers any content type, signed or not, with a 4xx and changes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constantFrom('text/plain', 'application/xml', 'multipart/form-data', 'application/jsonx', ''), fc.string({ maxLength: 30 })),
        fc.oneof(fc.constant(genuineClick()), text(200)),
        fc.boolean(),
        async (contentType, payload, signed) => {
          fc.pre(!/^application\/(json|x-www-form-urlencoded)\b/i.test(contentType.trim()));
          const before = await snapshot();
          const response = await post(payload, {
            ...(contentType ? { 'content-type': contentType } : {}),
            ...(signed ? slackHeaders(payload, nowSeconds()) : {}),
          });
          expect(response.statusCode, `${contentType} ${payload}`).toBeGreaterThanOrEqual(400);
          expect(response.statusCode, `${contentType} ${payload}`).toBeLessThan(500);
          await settled();
          expect(await snapshot()).toBe(before);
        },
      ),
      { numRuns: 150 },
    );
  }, 120_000);

  describe('regressions found by the fuzzer', () => {
    it('answers 400, not 500, to a signed view_submission without a view (Bolt reads body.view before any listener)', async () => {
      const before = await snapshot();
      const payload = interactionBody({ ...rejectSubmission({ proposalId: pendingId, userId: 'U0MALLORY' }), view: null });
      const response = await post(payload, { 'content-type': form, ...slackHeaders(payload, nowSeconds()) });
      expect(response.statusCode).toBe(400);
      await settled();
      expect(await snapshot()).toBe(before);
    });

    it('answers 400 to a signed reject submission whose view has no state or no proposal id', async () => {
      const submission = rejectSubmission({ proposalId: pendingId, userId: 'U0MALLORY' });
      const before = await snapshot();
      for (const view of [
        { ...submission.view, state: null },
        { ...submission.view, state: { values: 'none' } },
        { ...submission.view, private_metadata: 42 },
      ]) {
        const payload = interactionBody({ ...submission, view });
        const response = await post(payload, { 'content-type': form, ...slackHeaders(payload, nowSeconds()) });
        expect(response.statusCode, JSON.stringify(view)).toBe(400);
      }
      await settled();
      expect(await snapshot()).toBe(before);
    });

    it('does not take a user id of "group:S0OPS" for the approving group slack:group:S0OPS', async () => {
      const before = await snapshot();
      const impostor = 'group:S0OPS';
      for (const payload of [
        interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId: pendingId, userId: impostor })),
        interactionBody(rejectSubmission({ proposalId: pendingId, userId: impostor, reason: 'fuzz' })),
      ]) {
        const response = await post(payload, { 'content-type': form, ...slackHeaders(payload, nowSeconds()) });
        expect(response.statusCode).toBe(200);
        await settled();
      }
      expect(await snapshot()).toBe(before);
      expect(fake.callsTo('chat.postEphemeral').at(-1)?.args.text).toContain('not an approver');
    });
  });

  it('still takes the genuine click after the fuzzing (so the properties above could have seen a change)', async () => {
    const body = genuineClick();
    const response = await post(body, { 'content-type': form, ...slackHeaders(body, nowSeconds()) });
    expect(response.statusCode).toBe(200);
    await settled();
    expect((await twokey.services.proposals.get(pendingId)).status).toBe('committed');
    expect((await twokey.request('GET', '/healthz')).status).toBe(200);
  });
});
