import type { Logger } from 'pino';
import type { Database } from '../db/database.js';
import { startReplicaPresence } from '../db/replica-presence.js';
import { AGENT_CHANNEL, JOBS_CHANNEL, parseJobsNotice, PROPOSAL_CHANNEL } from '../db/store.js';
import type { OutboxWorker } from '../outbox/worker.js';
import type { Services } from './services.js';

/** How this replica's work is woken by changes: its own at once, other replicas' through PostgreSQL. */
export async function wakeOnChanges(
  { database, services, logger }: { database: Database; services: Services; logger: Logger },
  outbox: Pick<OutboxWorker, 'wake'>,
) {
  // Changes are saved already; only other replicas' wake-ups are late (until their next poll).
  database.notifier?.onFailure((error) => logger.warn({ err: error }, 'could not notify the other replicas of a change'));
  // A change made here has just queued jobs: run them now (or when they fall due) rather than at
  // the next poll, and only in the lanes that have something new.
  const unsubscribeOutbox = services.onJobsQueued((kinds, inMs, key) => outbox.wake(kinds, inMs, key));
  // On PostgreSQL a change made by any replica wakes this replica's long-polls, and jobs queued by
  // another replica wake this one's outbox too (its own it has woken already).
  const onProposalChanged = (proposalId: string) => services.changes.notify(proposalId);
  const onJobsQueued = (payload: string) => {
    const notice = parseJobsNotice(payload);
    if (notice.replica !== services.replica) outbox.wake(notice.kinds);
  };
  const listener = database.client ? await database.client.listen(PROPOSAL_CHANNEL, onProposalChanged) : null;
  const jobsListener = database.client ? await database.client.listen(JOBS_CHANNEL, onJobsQueued) : null;
  // Alone on the database, this replica's wake-ups stay in this process (replica-presence.ts).
  const presence =
    database.client && database.notifier
      ? await startReplicaPresence({
          replica: services.replica,
          client: database.client,
          notifier: database.notifier,
          deliverLocally: (channel, payload) => (channel === PROPOSAL_CHANNEL ? onProposalChanged(payload) : onJobsQueued(payload)),
        })
      : null;
  // A revocation on any replica (or by the CLI) empties this replica's key cache of that agent; on
  // every (re)subscription everything is forgotten, since a revocation may have come meanwhile.
  const agentsListener = database.client
    ? await database.client.listen(
        AGENT_CHANNEL,
        (agentId) => services.agents.forgetKeysOf(agentId),
        () => services.agents.forgetAllKeys(),
      )
    : null;
  return {
    unsubscribeOutbox,
    async unlisten(): Promise<void> {
      await presence?.stop();
      await listener?.unlisten().catch(() => undefined);
      await jobsListener?.unlisten().catch(() => undefined);
      await agentsListener?.unlisten().catch(() => undefined);
    },
  };
}
