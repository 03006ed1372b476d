/** The LISTEN/NOTIFY channels twokey uses, and the jobs notice's payload. */

/** The channel every replica LISTENs on to wake long-polls. */
export const PROPOSAL_CHANNEL = 'twokey_proposals';

/**
 * The channel that says which job kinds a replica just queued, so every replica's outbox claims
 * for those lanes only. Payload: `<replica>|<kind>,<kind>`; a replica ignores its own notices (it
 * woke its outbox at commit already).
 */
export const JOBS_CHANNEL = 'twokey_jobs';

/**
 * The channel of revoked agents (payload: the agent id), so every replica's key cache (src/core/agents.ts)
 * forgets a revoked key. Sent inside the revocation's own transaction, unlike the wake-ups: a revocation
 * is rare, and PostgreSQL then delivers it if and only if the revocation commits, to every replica
 * listening at that moment.
 */
export const AGENT_CHANNEL = 'twokey_agents';

/**
 * The channel on which replicas say they are here (`hello|<replica>`, `here|<replica>`,
 * `bye|<replica>`), so that a replica alone keeps its wake-ups to itself (replica-presence.ts).
 */
export const PRESENCE_CHANNEL = 'twokey_replicas';

/**
 * The channels whose notifications only wake replicas that may have missed a change (long-polls, the
 * outbox), sent after commit by the notifier: a replica alone may keep them to itself. Not the
 * revocations of AGENT_CHANNEL, which go inside their transaction, nor presence notices.
 */
export const WAKE_UP_CHANNELS: ReadonlySet<string> = new Set([PROPOSAL_CHANNEL, JOBS_CHANNEL]);

/** The JOBS_CHANNEL payload saying that `replica` queued jobs of these kinds. */
export function jobsNotice(replica: string, kinds: readonly string[]): string {
  return `${replica}|${kinds.join(',')}`;
}

export function parseJobsNotice(payload: string): { replica: string; kinds: string[] } {
  const bar = payload.indexOf('|');
  return {
    replica: payload.slice(0, Math.max(0, bar)),
    kinds: payload
      .slice(bar + 1)
      .split(',')
      .filter(Boolean),
  };
}
