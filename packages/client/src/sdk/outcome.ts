import type { Outcome } from './index.js';

/**
 * The words a language model reads about an outcome. Kept here, once, so every surface (the server's
 * MCP tool results, the framework adapters, AGP answers) says the same thing: the server imports it
 * from this package. Denials and expiries say plainly that the action did not happen and must not
 * be retried or worked around.
 */
export function outcomeText(outcome: Outcome, context: { result?: unknown; awaiting?: readonly string[] } = {}): string {
  const { result, awaiting } = context;
  const by = outcome.decidedBy.length > 0 ? outcome.decidedBy.join(', ') : 'nobody';
  const because = outcome.reason ? `: ${outcome.reason}` : '';
  switch (outcome.outcome) {
    case 'committed':
      return `Approved by ${by} and done${result === undefined || result === null ? '.' : `: ${JSON.stringify(result)}`}`;
    case 'approved':
      return `Approved by ${by}. The action has not run yet; it runs once the approval is committed.`;
    case 'failed':
      return `Approved by ${by}, but the action failed${because}. It did not take effect; it may be retried.`;
    case 'denied':
      return `Denied by ${by}${because}. The action did not happen; do not retry it or work around it.`;
    case 'expired':
      return 'Nobody approved this request before it expired. The action did not happen; do not retry it or work around it.';
    case 'cancelled':
      return `The request was cancelled${because}. The action did not happen.`;
    case 'pending':
      return `Waiting for approval${awaiting && awaiting.length > 0 ? ` by ${awaiting.join(', ')}` : ''}${
        outcome.decidedBy.length > 0 ? ` (approved so far by ${by})` : ''
      }; call this tool again with the same arguments to get the decision. The action has not happened yet.`;
  }
}
