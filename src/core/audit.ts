import { verifyAuditChain, type ChainVerdict } from './audit-chain.js';
import type { AuditEventRecord } from './model.js';
import type { AuditQuery, Store } from './ports.js';

const PAGE = 1000;

export function createAuditService(store: Pick<Store, 'listAudit'>) {
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
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
