import { verifyAuditChain, type ChainVerdict, type CheckpointIndex } from './audit-chain.js';
import type { ChainedAuditEvent } from './model.js';
import type { AuditQuery, Store } from './ports.js';

const PAGE = 1000;

/** How long a page may show a chain verdict before it is recomputed. */
const RECENT_VERDICT_MS = 30_000;

/**
 * `newestCheckpoints`: the newest signed checkpoints the server knows of (src/audit/witness.ts), so
 * a page's verdict holds against someone who rewrote the table and recomputed every hash.
 */
export function createAuditService(
  store: Pick<Store, 'listAudit'>,
  clock: () => Date = () => new Date(),
  newestCheckpoints?: () => Promise<CheckpointIndex | null>,
) {
  let recent: { at: number; verdict: Promise<ChainVerdict> } | null = null;
  async function* everyEvent(): AsyncGenerator<ChainedAuditEvent> {
    let afterSeq = 0;
    for (;;) {
      // With afterSeq the store returns placed rows only.
      const page = (await store.listAudit({ afterSeq, limit: PAGE })) as ChainedAuditEvent[];
      yield* page;
      const last = page.at(-1);
      if (!last || page.length < PAGE) return;
      afterSeq = last.seq;
    }
  }

  return {
    list: (query: AuditQuery) => store.listAudit(query),
    /** Every placed row in chain order, a page at a time (what `verify` walks). */
    events: everyEvent,
    /**
     * Recomputes the whole chain; names the first row that does not hold. With published
     * checkpoints, also the first row that differs from what they signed, and a deleted tail.
     */
    verify: (published?: CheckpointIndex): Promise<ChainVerdict> => verifyAuditChain(everyEvent(), published),
    /**
     * A verdict at most 30 s old, for pages viewed often: a full walk of a long log on every view
     * would make the page as slow as the log is long. `twokey audit verify` always walks it all.
     * The chain is checked against the newest signed checkpoint too: without one, the verdict has
     * no `checkpoints` and a page must not call the chain intact.
     */
    verifyRecent(): Promise<ChainVerdict> {
      const now = clock().getTime();
      if (!recent || now - recent.at > RECENT_VERDICT_MS) {
        const verdict = (async () => verifyAuditChain(everyEvent(), (await newestCheckpoints?.()) ?? undefined))();
        recent = { at: now, verdict };
        verdict.catch(() => (recent = null));
      }
      return recent.verdict;
    },
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
