/**
 * `rotate_key`, an operation slack:U0ALICE approves in C0KEYS, as an item of a config's `operations`
 * list, run by `executor` (YAML) and with any `more` keys of its own: what several Slack suites share.
 */
export function rotateKeyOperation(executor: string, more = ''): string {
  return `  - name: rotate_key
    description: Rotate a production API key
    params:
      type: object
      required: [key]
      properties:
        key: { type: string }
    summary: "{{agent}} wants to rotate the {{params.key}} key."
    approval:
      approvers: [slack:U0ALICE]
      slack: { channel: C0KEYS }
    executor: ${executor}
${more}`;
}

/** A config of `rotate_key` alone, run by an HTTP executor calling `downstreamUrl`/rotate signed with `secret`. */
export function rotateKeyConfig(downstreamUrl: string, secret: string): string {
  return `
operations:
${rotateKeyOperation(`{ type: http, url: "${downstreamUrl}/rotate", secret: "${secret}", timeout: 30s }`)}`;
}
