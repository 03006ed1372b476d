import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import { createClickInbox, type StoredClick } from '../../src/outbox/inbox.js';
import { openTestDatabase } from '../support/database.js';

/**
 * The burst gate of the `clicks` lane: decisions wait while a burst of clicks is being answered, and
 * a lone click is decided as soon as it is written. Milliseconds are injected, so nothing here
 * depends on how fast the machine is.
 */
describe('the clicks burst gate', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openTestDatabase('pglite');
  }, 180_000);
  afterAll(() => database.close());

  const click = (proposalId: string): StoredClick => ({
    kind: 'slack.click',
    proposalId,
    payload: { action: 'approve', proposalId, userId: 'U0CLICKER', channel: null, receivedAt: new Date().toISOString() },
  });

  function inboxAt() {
    let ms = 1_000_000;
    const inbox = createClickInbox({
      jobs: createJobStore(database.db),
      clock: () => new Date(),
      wake: () => {},
      now: () => ms,
      burstGapMs: 50,
      maxHoldMs: 1_000,
    });
    // Stored: its answer may go; the write's own bookkeeping ends within the same turn of the event loop.
    const store = async (proposalId: string) => {
      const id = await inbox.store(click(proposalId));
      await new Promise((resolve) => setImmediate(resolve));
      return id;
    };
    return { inbox, store, advance: (by: number) => (ms += by) };
  }

  it('lets a lone click be decided as soon as it is written', async () => {
    const { inbox, store, advance } = inboxAt();
    await store('prp_gate_lone');
    advance(1);
    expect(inbox.admitDecisions({ running: 0 })).toBe(true);
  });

  it('holds decisions while a burst arrives, and lets them go once it is over', async () => {
    const { inbox, store, advance } = inboxAt();
    await store('prp_gate_burst_1');
    advance(10);
    await store('prp_gate_burst_2');
    advance(10);
    expect(inbox.admitDecisions({ running: 0 })).toBe(false);
    advance(50);
    expect(inbox.admitDecisions({ running: 0 })).toBe(true);
    // A click long after the burst is lone again.
    advance(500);
    await store('prp_gate_after');
    expect(inbox.admitDecisions({ running: 0 })).toBe(true);
  });

  it('counts clicks that follow each other, each decided before the next, as lone clicks', async () => {
    const { inbox, store, advance } = inboxAt();
    // An approver (or a bench) approving proposals in turn: each click is decided before the next
    // arrives, 20 ms later. Gaps alone would call this a burst and hold every decision 50 ms.
    for (const n of [1, 2, 3]) {
      const id = await store(`prp_gate_turn_${n}`);
      advance(1);
      expect(inbox.admitDecisions({ running: 0 })).toBe(true);
      inbox.settled(id);
      advance(19);
    }
  });

  it('still holds a click that arrives while an earlier one is undecided', async () => {
    const { inbox, store, advance } = inboxAt();
    const first = await store('prp_gate_overlap_1');
    advance(20);
    await store('prp_gate_overlap_2');
    advance(1);
    expect(inbox.admitDecisions({ running: 1 })).toBe(false);
    inbox.settled(first);
    advance(50);
    expect(inbox.admitDecisions({ running: 0 })).toBe(true);
  });

  it('still holds two clicks that overlap each other when an older undecided one is past its hold', async () => {
    const { inbox, store, advance } = inboxAt();
    // Stored here, claimed and decided by another replica: this process never sees it settle.
    await store('prp_gate_elsewhere');
    advance(1_000);
    await store('prp_gate_elsewhere_then_1');
    advance(20);
    await store('prp_gate_elsewhere_then_2');
    advance(1);
    // The two new ones overlap each other (the first is undecided), whatever became of the old one.
    expect(inbox.admitDecisions({ running: 0 })).toBe(false);
  });

  it('lets a click through at once when the only undecided one was stored a hold ago', async () => {
    const { inbox, store, advance } = inboxAt();
    await store('prp_gate_stale');
    advance(1_000);
    const next = await store('prp_gate_stale_next');
    advance(20);
    inbox.settled(next);
    await store('prp_gate_stale_last');
    advance(1);
    expect(inbox.admitDecisions({ running: 0 })).toBe(true);
  });
});
