import fc from 'fast-check';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import {
  ALICE,
  APPLICATION_ID,
  CAROL,
  GUILD,
  MALLORY,
  OPS_ROLE,
  OTHER_ROLE,
  OWNER,
  buttonPress,
  makeSigner,
  modalSubmit,
  startDiscordTwokey,
  type Clicker,
  type DiscordTwokey,
} from '../discord/helpers.js';

/**
 * Property-based fuzzing of `POST /discord/interactions`: whatever arrives, signed or not, the answer
 * is never a 5xx, every refusal has twokey's error shape, the process keeps serving, and nothing but
 * a genuine approver's press on a real pending proposal changes the database.
 */
describe.each(drivers)('Discord interactions under fuzzing (%s)', (driver) => {
  const clock = manualClock();
  let t: DiscordTwokey;
  let pendingId: string;
  /** Needs ALICE and BOB: one press by either would already write an approval. */
  let quorumTwoId: string;
  let rejectedId: string;

  beforeAll(async () => {
    t = await startDiscordTwokey({ driver, clock });
    pendingId = (await t.propose('delete_workspace', { workspace: 'acme-prod' })).id;
    quorumTwoId = (await t.propose('rotate_keys', { service: 'billing' })).id;
    rejectedId = (await t.propose('delete_workspace', { workspace: 'old' })).id;
    await t.twokey.services.proposals.reject(rejectedId, { identity: `discord:user:${ALICE}`, via: 'discord' }, 'no');
    // The outbox posts and edits the messages in the background; fuzzing starts once it is idle.
    await vi.waitFor(async () => expect(await queryRow(sql`select count(*) filter (where status <> 'done')::int as n from jobs`)).toEqual({ n: 0 }), {
      timeout: 10_000,
      interval: 50,
    });
  });
  afterAll(() => t.close());

  async function queryRow(query: ReturnType<typeof sql>): Promise<unknown> {
    const result = await t.twokey.services.database.db.execute(query);
    const rows = Array.isArray(result) ? result : (result as { rows: unknown[] }).rows;
    return rows[0];
  }

  const snapshot = async () =>
    JSON.stringify(
      await queryRow(sql`
        select (select count(*) from proposals)::int as proposals,
               (select count(*) from approvals)::int as approvals,
               (select count(*) from audit_events)::int as audit,
               (select count(*) from jobs)::int as jobs,
               (select count(*) from chat_messages)::int as messages,
               (select string_agg(status || coalesce(consumed_at::text, ''), ',' order by id) from proposals) as states`),
    );

  /** Decisions run after the response; waits for them so a late state change is seen. */
  async function settled(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    await t.discord.settle();
  }

  const post = (payload: string, headers: Record<string, string | string[]>) =>
    t.twokey.app.inject({ method: 'POST', url: '/discord/interactions', headers, payload });
  const nowSeconds = () => Math.floor(clock().getTime() / 1000);

  /** Asserts the answer is a client error in twokey's shape, or a success. */
  function expectNoServerError(response: { statusCode: number; body: string }, context: string): void {
    expect(response.statusCode, context).toBeLessThan(500);
    if (response.statusCode >= 400) {
      const body = JSON.parse(response.body) as { error?: { code?: unknown; message?: unknown; requestId?: unknown } };
      expect(body.error, context).toMatchObject({ code: expect.any(String), message: expect.any(String), requestId: expect.any(String) });
    }
  }

  /** Any string, NUL and lone surrogates included (what PostgreSQL refuses to store). */
  const text = (maxLength: number) =>
    fc.oneof(fc.string({ maxLength }), fc.string({ unit: 'binary', maxLength }), fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfff'));
  /** Anything in a field that is usually an object (member, user, data…). */
  const oddValue = () =>
    fc.oneof(fc.constant(undefined), fc.constant(null), fc.jsonValue({ maxDepth: 2 }), fc.jsonValue({ maxDepth: 2, stringUnit: 'binary' }));
  /** Mostly the real thing, sometimes not. */
  const usually = <T, U>(real: fc.Arbitrary<T>, other: fc.Arbitrary<U>): fc.Arbitrary<T | U> =>
    fc.oneof({ arbitrary: real, weight: 4 }, { arbitrary: other, weight: 1 });
  /** Half the time, up to `max` fields of `record` replaced by odd values (undefined drops the field from the JSON). */
  const mutated = <T extends Record<string, unknown>>(record: T, keys: string[], max = 2) =>
    fc
      .oneof(fc.constant([]), fc.array(fc.tuple(fc.constantFrom(...keys), oddValue()), { minLength: 1, maxLength: max }))
      .map((changes) => ({ ...record, ...Object.fromEntries(changes) }));

  const snowflakes = () => fc.bigInt({ min: 10n ** 16n, max: 10n ** 20n - 1n }).map(String);

  const proposalIds = () =>
    fc.oneof(
      { arbitrary: fc.constantFrom(pendingId, quorumTwoId, rejectedId, `${pendingId}x`, pendingId.toUpperCase(), `${pendingId}\n`), weight: 6 },
      { arbitrary: text(90), weight: 3 },
      { arbitrary: fc.nat({ max: 200_000 }).map((n) => 'a'.repeat(n)), weight: 1 },
    );
  const customIds = () =>
    usually(
      fc.tuple(fc.constantFrom('approve', 'reject', 'retry'), proposalIds()).map(([action, id]) => `twokey:${action}:${id}`),
      fc.oneof(
        fc.tuple(text(10), proposalIds()).map(([action, id]) => `twokey:${action}:${id}`),
        text(100),
        fc.constantFrom('twokey:approve:', 'twokey:approve', 'twokey::x', `TWOKEY:APPROVE:${pendingId}`, `twokey:approve:${pendingId}:extra`),
      ),
    );

  /** Anyone but a decider: CAROL and OWNER are real members, just not allowed (no ops role, owner rule). */
  const clickers = () =>
    fc.record({
      userId: usually(
        fc.oneof(fc.constantFrom(MALLORY, OWNER, CAROL, OPS_ROLE, GUILD), snowflakes()),
        fc.oneof(fc.constantFrom(`${ALICE}0`, ` ${ALICE}`, ALICE.slice(1), `discord:user:${ALICE}`), text(25)),
      ),
      roles: fc.array(fc.oneof(fc.constantFrom(OTHER_ROLE, GUILD, `${OPS_ROLE} `, `discord:role:${OPS_ROLE}`), text(20)), { maxLength: 3 }),
    });

  const interactionKeys = ['id', 'application_id', 'type', 'token', 'version', 'guild_id', 'channel_id', 'member', 'user', 'message', 'data', 'locale'];

  const presses = () =>
    fc.tuple(customIds(), clickers()).chain(([customId, clicker]) => {
      const press = buttonPress(customId, clicker);
      return usually(fc.constant(press.data), oddValue()).chain((data) => mutated({ ...press, data }, interactionKeys));
    });

  const modals = () =>
    fc.tuple(customIds(), clickers(), usually(text(600), text(5000))).chain(([customId, clicker, reason]) => {
      const submit = modalSubmit(customId, clicker, reason);
      return mutated(submit, interactionKeys, 1).chain((body) =>
        usually(
          fc.constant(body),
          oddValue().map((components) => ({ ...body, data: { custom_id: customId, components } })),
        ),
      );
    });

  /** Anything with an interaction's outline: a type number, maybe the ids, random data. */
  const outlines = () =>
    fc.record(
      {
        type: fc.oneof(fc.integer({ min: -2, max: 12 }), fc.double(), oddValue()),
        id: fc.oneof(snowflakes(), oddValue()),
        token: fc.oneof(text(40), oddValue()),
        application_id: fc.oneof(fc.constant(APPLICATION_ID), oddValue()),
        data: oddValue(),
        member: oddValue(),
        user: oddValue(),
      },
      { requiredKeys: ['type'] },
    );

  const signedBodies = () =>
    fc.oneof(
      presses().map((value) => JSON.stringify(value)),
      modals().map((value) => JSON.stringify(value)),
      outlines().map((value) => JSON.stringify(value)),
      fc.jsonValue().map((value) => JSON.stringify(value) ?? ''),
      text(300),
      fc.constantFrom('{"type":1', '{"type":1}garbage', '\u0000', '{"type":3,"__proto__":{"member":{"user":{"id":"' + ALICE + '"}}}}'),
    );

  it('never answers 5xx to a signed but malformed interaction, and changes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(
        signedBodies(),
        usually(fc.constant('application/json'), fc.constantFrom('application/json; charset=utf-8', 'text/plain', '')),
        fc.integer({ min: -300, max: 300 }),
        async (payload, contentType, skew) => {
          const before = await snapshot();
          const response = await post(payload, { ...t.signer.headers(payload, nowSeconds() + skew), 'content-type': contentType });
          expectNoServerError(response, payload.slice(0, 2000));
          await settled();
          expect(await snapshot(), payload.slice(0, 2000)).toBe(before);
        },
      ),
      { numRuns: 300 },
    );
    expect((await t.twokey.request('GET', '/healthz')).status).toBe(200);
  }, 120_000);

  it("answers an approver's presses that cannot decide anything without changing anything", async () => {
    // Approvers (by user id, or by the ops role), on what they may not decide: a press that only opens
    // the reject form, a retry of something not failed, a decided or unknown proposal.
    const approvers = fc.constantFrom<Clicker[]>({ userId: ALICE }, { userId: CAROL, roles: [OPS_ROLE] }, { userId: MALLORY, roles: [OTHER_ROLE, OPS_ROLE] });
    const unknownIds = fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789_-'), minLength: 1, maxLength: 40 }).map((id) => `prp_${id}`);
    const inert = fc.oneof(
      fc.tuple(fc.constant('reject'), fc.constantFrom(pendingId, quorumTwoId, rejectedId)),
      fc.tuple(fc.constant('retry'), fc.oneof(fc.constantFrom(pendingId, quorumTwoId, rejectedId), unknownIds)),
      fc.tuple(fc.constant('approve'), fc.oneof(fc.constant(rejectedId), unknownIds)),
      fc.tuple(fc.constant('modal'), fc.oneof(fc.constant(rejectedId), unknownIds)),
    );
    await fc.assert(
      fc.asyncProperty(approvers, inert, text(100), async (clicker, [action, id], reason) => {
        const before = await snapshot();
        const payload = JSON.stringify(
          action === 'modal' ? modalSubmit(`twokey:reject:${id}`, clicker, reason) : buttonPress(`twokey:${action}:${id}`, clicker),
        );
        const response = await post(payload, t.signer.headers(payload, nowSeconds()));
        expect(response.statusCode).toBe(200);
        // The reject button opens the form (9) for one who may decide that pending proposal; anything else is a private refusal (4).
        const mayDecide = id === pendingId || (id === quorumTwoId && clicker.userId === ALICE);
        expect(response.json().type).toBe(action === 'reject' && mayDecide ? 9 : 4);
        await settled();
        expect(await snapshot()).toBe(before);
      }),
      { numRuns: 100 },
    );
  }, 120_000);

  const genuinePress = () => JSON.stringify(buttonPress(`twokey:approve:${pendingId}`, { userId: ALICE }));

  /** Headers without a valid, fresh signature of this body. */
  const badSignatures = () => {
    const impostor = makeSigner();
    const hex = (length: number) => fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: length, maxLength: length });
    return fc.oneof(
      fc.constant(() => ({})),
      fc.string({ maxLength: 140 }).map((signature) => () => ({ 'x-signature-ed25519': signature, 'x-signature-timestamp': String(nowSeconds()) })),
      hex(128).map((signature) => () => ({ 'x-signature-ed25519': signature, 'x-signature-timestamp': String(nowSeconds()) })),
      fc.string({ maxLength: 20 }).map((timestamp) => (body: string) => ({ ...t.signer.headers(body, nowSeconds()), 'x-signature-timestamp': timestamp })),
      fc.constant((body: string) => impostor.headers(body, nowSeconds())),
      fc.string({ minLength: 1, maxLength: 40 }).map((extra) => (body: string) => t.signer.headers(`${body}${extra}`, nowSeconds())),
      fc
        .integer({ min: 1, max: 1000 })
        .map((delta) => (body: string) => ({ ...t.signer.headers(body, nowSeconds() - delta), 'x-signature-timestamp': String(nowSeconds()) })),
      // Replays and pre-signed requests: a valid signature, more than 5 minutes off.
      fc.integer({ min: 301, max: 10_000_000 }).map((age) => (body: string) => t.signer.headers(body, nowSeconds() - age)),
      fc.integer({ min: 301, max: 10_000_000 }).map((ahead) => (body: string) => t.signer.headers(body, nowSeconds() + ahead)),
      // A valid pair sent twice: which of the two counts is ambiguous, so neither does.
      fc.constant((body: string) => {
        const headers = t.signer.headers(body, nowSeconds());
        return { ...headers, 'x-signature-ed25519': [headers['x-signature-ed25519'] ?? '', headers['x-signature-ed25519'] ?? ''] };
      }),
    );
  };

  it('refuses every interaction without a valid, fresh signature with 401, and changes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(
        // The genuine approver's press on the pending proposal is in the mix: unsigned, it must not count.
        fc.oneof(
          fc.constant(null).map(() => genuinePress()),
          signedBodies(),
        ),
        fc.constantFrom('application/json', 'text/plain'),
        badSignatures(),
        async (payload, contentType, headersFor) => {
          const before = await snapshot();
          const response = await post(payload, { 'content-type': contentType, ...headersFor(payload) });
          expect(response.statusCode, payload.slice(0, 2000)).toBe(401);
          // 401 and nothing else, as Discord's own verification probes expect (and Slack answers).
          expect(response.body).toBe('');
          await settled();
          expect(await snapshot()).toBe(before);
        },
      ),
      { numRuns: 200 },
    );
  }, 120_000);

  it('still takes the genuine press after the fuzzing (so the properties above could have seen a change)', async () => {
    const body = genuinePress();
    const response = await post(body, t.signer.headers(body, nowSeconds()));
    expect(response.statusCode).toBe(200);
    await settled();
    expect((await t.twokey.services.proposals.get(pendingId)).status).toBe('committed');
    expect((await t.twokey.request('GET', '/healthz')).status).toBe(200);
  });
});
