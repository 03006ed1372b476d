/**
 * A bad environment variable or config field. Every entry of `issues` starts with the
 * variable name or the field path (`operations[2].approval.quorum: …`), so an operator can
 * fix the problem from the message alone. Messages never carry the offending value: it may
 * be a secret.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly issues: readonly string[];

  constructor(heading: string, issues: readonly string[]) {
    super([heading, ...issues.map((issue) => `  ${issue}`)].join('\n'));
    this.issues = issues;
  }
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** `['operations', 2, 'approval', 'quorum']` → `operations[2].approval.quorum` */
export function formatFieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (typeof segment === 'string' && IDENTIFIER.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(String(segment))}]`;
  }
  return out;
}
