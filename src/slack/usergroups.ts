import type { webApi } from '@slack/bolt';

type WebClient = InstanceType<typeof webApi.WebClient>;

export interface UsergroupDirectoryOptions {
  client: Pick<WebClient, 'usergroups'>;
  /** How long a group's member list is trusted. Short: removing someone from a group must bite soon. */
  ttlMs?: number;
  now?: () => number;
}

interface Entry {
  members: Promise<ReadonlySet<string>>;
  fetchedAt: number;
}

/**
 * Resolves `slack:group:S…` approvers through `usergroups.users.list`, cached for about a minute so
 * that 20 clicks in a second cost one API call. Concurrent lookups of one group share one request;
 * a failed lookup is not cached.
 */
export function createUsergroupDirectory(options: UsergroupDirectoryOptions) {
  const ttlMs = options.ttlMs ?? 60_000;
  const now = options.now ?? Date.now;
  const cache = new Map<string, Entry>();

  function membersOf(groupId: string): Promise<ReadonlySet<string>> {
    const cached = cache.get(groupId);
    if (cached && now() - cached.fetchedAt < ttlMs) return cached.members;
    const members = options.client.usergroups.users
      .list({ usergroup: groupId, include_disabled: false })
      .then((response) => new Set(response.users ?? []) as ReadonlySet<string>);
    const entry = { members, fetchedAt: now() };
    cache.set(groupId, entry);
    members.catch(() => {
      if (cache.get(groupId) === entry) cache.delete(groupId);
    });
    return members;
  }

  /** The groups among `groupIds` that `userId` belongs to. Throws when Slack cannot be asked. */
  async function groupsOf(userId: string, groupIds: readonly string[]): Promise<string[]> {
    const memberships = await Promise.all(groupIds.map(async (id) => ((await membersOf(id)).has(userId) ? id : null)));
    return memberships.filter((id): id is string => id !== null);
  }

  return { membersOf, groupsOf };
}

export type UsergroupDirectory = ReturnType<typeof createUsergroupDirectory>;
