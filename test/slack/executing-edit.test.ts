import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EXECUTING_EDIT_DELAY_MS } from '../../src/core/effects.js';
import { drivers } from '../support/database.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import type { SlackCall } from './support/fake-slack.js';
import { rotateKeyConfig } from './support/rotate-key.js';
import { startSlackTwokey, type SlackTwokey } from './support/slack-twokey.js';

const SECRET = 'executing-edit-downstream-secret';
const config = (downstream: string) => rotateKeyConfig(downstream, SECRET);

const WAIT = { timeout: 8_000, interval: 20 };

/**
 * The chat edit of an execution that starts waits EXECUTING_EDIT_DELAY_MS: a short execution goes
 * from the proposal to its outcome in one edit, a longer one shows "Executing" first. The outbox
 * polls once in ten minutes here, so the delayed edit runs only if its own wake-up comes.
 */
describe.each(drivers)('the message of an execution that starts (%s)', (driver) => {
  let downstream: FakeDownstream;
  let twokey: SlackTwokey;

  beforeAll(async () => {
    downstream = await startFakeDownstream(SECRET);
    twokey = await startSlackTwokey({ driver, configYaml: config(downstream.url), outboxPollMs: 600_000 });
  });
  afterAll(async () => {
    await twokey?.close();
    await downstream?.close();
  });

  async function proposeAndApprove(key: string): Promise<string> {
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey: twokey.apiKey, body: { operation: 'rotate_key', params: { key } } });
    expect(proposed.status).toBe(201);
    const id: string = proposed.body.id;
    await vi.waitFor(() => expect(postOf(id)).toBeDefined(), WAIT);
    await twokey.services.proposals.approve(id, { identity: 'slack:U0ALICE', via: 'test' });
    return id;
  }
  const postOf = (id: string): SlackCall | undefined =>
    twokey.fake.callsTo('chat.postMessage').find((call) => !call.args.thread_ts && JSON.stringify(call.args.blocks ?? []).includes(id));
  const editsOf = (id: string): SlackCall[] => twokey.fake.callsTo('chat.update').filter((call) => JSON.stringify(call.args.blocks).includes(id));
  const statusLinesOf = (id: string): string[] => editsOf(id).map((call) => (/Executing|Committed/.exec(JSON.stringify(call.args.blocks)) ?? ['other'])[0]);

  it('a short execution: one edit, straight to its outcome', async () => {
    downstream.setBehaviour('ok');
    const id = await proposeAndApprove('billing');
    await vi.waitFor(() => expect(statusLinesOf(id)).toEqual(['Committed']), WAIT);
    // Nothing else comes: the edit queued for "Executing" was the one that showed the outcome.
    await new Promise((settled) => setTimeout(settled, EXECUTING_EDIT_DELAY_MS + 200));
    expect(statusLinesOf(id)).toEqual(['Committed']);
  });

  it('a long execution: "Executing" once it has run for the delay, then its outcome', async () => {
    downstream.setBehaviour('slow', EXECUTING_EDIT_DELAY_MS + 700);
    const approving = Date.now();
    const id = await proposeAndApprove('search');
    await vi.waitFor(() => expect(statusLinesOf(id)).toEqual(['Executing']), WAIT);
    const [executingEdit] = editsOf(id);
    expect((executingEdit?.at ?? 0) - approving).toBeGreaterThanOrEqual(EXECUTING_EDIT_DELAY_MS - 20);
    await vi.waitFor(() => expect(statusLinesOf(id)).toEqual(['Executing', 'Committed']), WAIT);
  });
});
