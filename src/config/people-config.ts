import { identities } from '../platforms/index.js';
import { createPeople, type PersonDefinition } from '../core/people.js';

/** The checks of `people:` that span entries, and the quorum they bound (config-file.ts runs them). */

/** Groups and roles may hold any number of people, so only these bound the quorum. */
function isIndividual(identity: string): boolean {
  const kind = identities.parseIdentity(identity)?.kind;
  return kind !== undefined && identities.isPersonKind(kind);
}

/**
 * A person's name and each identity belong to one person only: otherwise "who is this" would have
 * two answers, and quorum and the owner rule would depend on which one was read.
 */
export function peopleIssues(people: readonly PersonDefinition[]): string[] {
  const issues: string[] = [];
  const names = new Map<string, number>();
  const owners = new Map<string, string>();
  people.forEach((person, i) => {
    const first = names.get(person.name);
    if (first !== undefined) issues.push(`people[${i}].name: duplicate person name (also people[${first}])`);
    else names.set(person.name, i);
    person.identities.forEach((identity, j) => {
      const where = `people[${i}].identities[${j}]`;
      const previous = owners.get(identity);
      if (previous !== undefined) issues.push(`${where}: ${identity} is already listed (${previous})`);
      else owners.set(identity, where);
    });
  });
  return issues;
}

/** Only individuals bound the quorum, counted as people: two identities of one person are one approver. */
export function quorumIssues(
  operations: readonly { approval: { approvers: readonly string[]; quorum: number } }[],
  people: readonly PersonDefinition[],
): string[] {
  const directory = createPeople(people);
  return operations.flatMap((operation, i) => {
    const { approvers, quorum } = operation.approval;
    if (!approvers.every(isIndividual)) return [];
    const persons = new Set(approvers.map((identity) => directory.personOf(identity))).size;
    if (quorum <= persons) return [];
    const unit = persons === approvers.length ? 'individual approvers' : 'individual approvers, counted as people';
    return [`operations[${i}].approval.quorum: cannot exceed the number of ${unit} (${persons})`];
  });
}
