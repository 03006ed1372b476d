import { EventEmitter } from 'node:events';
import type { ProposalRecord } from './model.js';

/**
 * In-process notice of proposal changes, so a long-poll wakes as soon as this process changes a
 * proposal. Changes made by other processes arrive through the database's notifications.
 */
const EVERY = Symbol('every change');
const ANY = Symbol('any change, here or on another replica');

export function createChangeFeed() {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);

  return {
    publish(proposal: ProposalRecord): void {
      emitter.emit(proposal.id);
      emitter.emit(EVERY, proposal);
      emitter.emit(ANY);
    },
    /** A change another replica made (PostgreSQL NOTIFY): wakes long-polls of that proposal. */
    notify(proposalId: string): void {
      emitter.emit(proposalId);
      emitter.emit(ANY);
    },
    /** Every change, made here or (told by PostgreSQL) on another replica; returns the unsubscribe function. */
    onAny(listener: () => void): () => void {
      emitter.on(ANY, listener);
      return () => emitter.off(ANY, listener);
    },
    /** Every change this process makes; returns the unsubscribe function. */
    onEvery(listener: (proposal: ProposalRecord) => void): () => void {
      emitter.on(EVERY, listener);
      return () => emitter.off(EVERY, listener);
    },
    /**
     * How many are subscribed now: to one proposal's changes (long-polls), or without an id to every
     * change (live pages and metrics). Each wait that ends must leave none behind.
     */
    watchers(proposalId?: string): number {
      return emitter.listenerCount(proposalId ?? EVERY);
    },
    /** Resolves true on the next change of this proposal, false after `timeoutMs`. */
    next(proposalId: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
      // An already-aborted signal never fires 'abort': subscribing would leave a listener until the timeout.
      if (signal?.aborted) return Promise.resolve(false);
      return new Promise((resolve) => {
        const done = (changed: boolean) => {
          clearTimeout(timer);
          emitter.off(proposalId, onChange);
          signal?.removeEventListener('abort', onAbort);
          resolve(changed);
        };
        const onChange = () => done(true);
        const onAbort = () => done(false);
        const timer = setTimeout(() => done(false), timeoutMs);
        emitter.on(proposalId, onChange);
        signal?.addEventListener('abort', onAbort);
      });
    },
  };
}

export type ChangeFeed = ReturnType<typeof createChangeFeed>;
