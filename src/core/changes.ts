import { EventEmitter } from 'node:events';
import type { ApprovalRecord, ProposalRecord } from './model.js';

/**
 * A committed change as its author knew it whole: the proposal as the change left it, its approvals,
 * and whether a request identity still waits for its agent to see the final outcome. All an agent's
 * view of the proposal is made of, so a long-poll woken by it answers without reading the proposal
 * back (src/core/proposals.ts, `viewForAgent`).
 */
export interface ProposalSnapshot {
  proposal: ProposalRecord;
  approvals: readonly ApprovalRecord[];
  unseenRequest: boolean;
}

/** What a snapshot holds besides the proposal: what a change's author must know to publish one. */
export type SnapshotFacts = Omit<ProposalSnapshot, 'proposal'>;

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
    /** A change this process committed; with its snapshot when the change's author knew one. */
    publish(proposal: ProposalRecord, snapshot?: ProposalSnapshot): void {
      emitter.emit(proposal.id, snapshot);
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
    /**
     * Settles on the next change of this proposal, or after `timeoutMs` (or an abort) with false. A
     * change published here with its snapshot settles with the snapshot; any other (told by another
     * replica, or published without one) with true, and the waiter reads the proposal itself.
     */
    next(proposalId: string, timeoutMs: number, signal?: AbortSignal): Promise<ProposalSnapshot | boolean> {
      // An already-aborted signal never fires 'abort': subscribing would leave a listener until the timeout.
      if (signal?.aborted) return Promise.resolve(false);
      return new Promise((resolve) => {
        const done = (woken: ProposalSnapshot | boolean) => {
          clearTimeout(timer);
          emitter.off(proposalId, onChange);
          signal?.removeEventListener('abort', onAbort);
          resolve(woken);
        };
        const onChange = (snapshot?: ProposalSnapshot) => done(snapshot ?? true);
        const onAbort = () => done(false);
        const timer = setTimeout(() => done(false), timeoutMs);
        emitter.on(proposalId, onChange);
        signal?.addEventListener('abort', onAbort);
      });
    },
  };
}

export type ChangeFeed = ReturnType<typeof createChangeFeed>;

/** The snapshot a wait for a change (`ChangeFeed.next`) settled with, when the change brought one. */
export const snapshotOf = (woken: ProposalSnapshot | boolean): ProposalSnapshot | undefined => (typeof woken === 'object' ? woken : undefined);
