/**
 * People: one human behind several identities (`web:alice` in the console, `slack:U0ALICE` in
 * Slack). Quorum counts people, not identities, and the owner rule covers every identity of the
 * owner's person; otherwise one human with two accounts would be two keys. An identity listed under
 * no person is a person of its own.
 *
 * Rights are not shared: being on an approvers list is still per identity (each channel proves only
 * the identity it saw), so listing `web:alice` under alice does not let her console account approve
 * what only `slack:U0ALICE` may.
 */
export interface PersonDefinition {
  name: string;
  identities: readonly string[];
}

export interface People {
  /** A stable key for the human behind an identity: `person:NAME`, or the identity itself. */
  personOf(identity: string): string;
  /** The person's name when the identity is listed under one. */
  nameOf(identity: string): string | null;
}

export function createPeople(people: readonly PersonDefinition[] = []): People {
  const byIdentity = new Map<string, string>();
  for (const person of people) {
    for (const identity of person.identities) byIdentity.set(identity, person.name);
  }
  return {
    personOf: (identity) => {
      const name = byIdentity.get(identity);
      return name === undefined ? identity : `person:${name}`;
    },
    nameOf: (identity) => byIdentity.get(identity) ?? null,
  };
}

/** Everyone is their own person: the rule when no `people:` are configured. */
export const noPeople: People = createPeople();

export const samePerson = (people: People, a: string, b: string): boolean => people.personOf(a) === people.personOf(b);
