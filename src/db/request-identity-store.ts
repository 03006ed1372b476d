import { and, eq, inArray, isNull, sql } from 'drizzle-orm';
import { UNFINISHED_STATUSES, type ProposalStatus } from '../core/model.js';
import type { IdentityClaim, RequestIdentityStore } from '../core/ports.js';
import type { Db } from './database.js';
import { requestIdentities } from './schema.js';
import { rowsOf } from './rows.js';

/** postgres.js answers `execute` with an array, PGlite with `{ rows }`. */

/** An unfinished proposal holds its identity outright, except an approved one, whose hold ends with its expiry. */
const stillRunning = UNFINISHED_STATUSES.filter((status) => status !== 'approved');
/** A status literal typed against the one list, so a renamed status fails tsc rather than matching nothing. */
const isStatus = (status: ProposalStatus) => sql`p.status = ${status}`;

/**
 * Which proposal answers a request identity (the rules: src/core/request-identity.ts). SQL only; the
 * "still answers" condition lives here, in the claim, so every replica applies the same one atomically.
 */
export function createRequestIdentityStore(db: Db): RequestIdentityStore {
  return {
    async claim(key: string, agentId: string, now: Date, claimMs: number): Promise<IdentityClaim> {
      // Raw SQL parameters go to the driver as they are, and postgres.js takes no Date there: ISO text, cast.
      const until = sql`${new Date(now.getTime() + claimMs).toISOString()}::timestamptz`;
      const at = sql`${now.toISOString()}::timestamptz`;
      // The proposal must be seen to no longer answer: "exists … and not", never "not exists … and".
      // Under load this statement can take its snapshot before a racing caller's proposal commits,
      // then wait on the identity's row while that caller records the proposal's id, and meet the id
      // once the row is free: the subquery still reads the old snapshot, in which the proposal is
      // not there. "Not exists" took that for a proposal that no longer answers and proposed again
      // (two requests for twenty identical calls, seen in CI); "exists" leaves the identity to it.
      // A proposal an identity names is never deleted under it (the foreign key).
      const won = await db.execute<{ key: string }>(sql`
        insert into request_identities (key, agent_id, proposal_id, claimed_until, sealed_token, seen_at, updated_at)
        values (${key}, ${agentId}, null, ${until}, null, null, ${at})
        on conflict (key) do update
          set proposal_id = null, claimed_until = excluded.claimed_until, sealed_token = null, seen_at = null, updated_at = excluded.updated_at
        where (request_identities.proposal_id is null and request_identities.claimed_until < ${at})
           or (request_identities.proposal_id is not null and exists (
                select 1 from proposals p
                 where p.id = request_identities.proposal_id
                   and not (${inArray(sql`p.status`, stillRunning)}
                     or (${isStatus('approved')} and p.expires_at > ${at})
                     or (${isStatus('committed')} and p.commit_mode = 'on_approve' and request_identities.seen_at is null)
                     or (${isStatus('expired')} and request_identities.seen_at is null)
                     or (${isStatus('rejected')} and (request_identities.seen_at is null or p.expires_at > ${at})))))
        returning key`);
      if (rowsOf(won).length > 0) return { claimed: true };
      const [row] = await db
        .select({ proposalId: requestIdentities.proposalId, sealedToken: requestIdentities.sealedToken })
        .from(requestIdentities)
        .where(eq(requestIdentities.key, key));
      return { claimed: false, proposalId: row?.proposalId ?? null, sealedToken: row?.sealedToken ?? null };
    },
    async record(key, made, now): Promise<void> {
      await db
        .update(requestIdentities)
        .set({ proposalId: made.proposalId, sealedToken: made.sealedToken, seenAt: made.seen ? now : null, claimedUntil: now, updatedAt: now })
        .where(eq(requestIdentities.key, key));
    },
    async release(key: string): Promise<void> {
      await db.delete(requestIdentities).where(and(eq(requestIdentities.key, key), isNull(requestIdentities.proposalId)));
    },
  };
}
