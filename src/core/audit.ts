import { verifyAuditChain, type ChainVerdict } from './audit-chain.js';
import type { AuditEventRecord } from './model.js';
import type { AuditQuery, Store } from './ports.js';

const PAGE = 1000;

/** How long a page may show a chain verdict before it is recomputed. */
const RECENT_VERDICT_MS = 30_000;

export function createAuditService(store: Pick<Store, 'listAudit'>, clock: () => Date = () => new Date()) {
  let recent: { at: number; verdict: Promise<ChainVerdict> } | null = null;
  async function* everyEvent(): AsyncGenerator<AuditEventRecord> {
    let afterSeq = 0;
    for (;;) {
      const page = await store.listAudit({ afterSeq, limit: PAGE });
      yield* page;
      const last = page.at(-1);
      if (!last || page.length < PAGE) return;
      afterSeq = last.seq;
    }
  }

  return {
    list: (query: AuditQuery) => store.listAudit(query),
    /** Recomputes the whole chain; names the first row that does not hold. */
    verify: (): Promise<ChainVerdict> => verifyAuditChain(everyEvent()),
    /**
     * A verdict at most 30 s old, for pages viewed often: a full walk of a long log on every view
     * would make the page as slow as the log is long. `twokey audit verify` always walks it all.
     */
    verifyRecent(): Promise<ChainVerdict> {
      const now = clock().getTime();
      if (!recent || now - recent.at > RECENT_VERDICT_MS) {
        const verdict = verifyAuditChain(everyEvent());
        recent = { at: now, verdict };
        verdict.catch(() => (recent = null));
      }
      return recent.verdict;
    },
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
