import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { drivers } from '../support/database.js';
import { startConsoleTwokey, type ConsoleTwokey } from './support.js';

// A console tab subscribes to every change for its live updates. When the browser goes away the
// subscription (and its heartbeat) must end with it, or each closed tab leaks one until its session ends.
describe.each(drivers)('console live events (%s)', (driver) => {
  let twokey: ConsoleTwokey;

  beforeAll(async () => {
    twokey = await startConsoleTwokey({ driver, listen: true });
  });
  afterAll(() => twokey.close());

  it('ends the subscription when the browser closes the stream', async () => {
    const { cookie } = await twokey.signIn('web:operator');
    const before = twokey.services.changes.watchers();
    const gone = new AbortController();
    const stream = await fetch(`${twokey.baseUrl}/console/events`, { headers: { cookie }, signal: gone.signal });
    expect(stream.status).toBe(200);
    expect(twokey.services.changes.watchers()).toBe(before + 1);
    gone.abort();
    await vi.waitFor(() => expect(twokey.services.changes.watchers()).toBe(before));
  });
});
