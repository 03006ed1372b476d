/** How each operator operation's JSON answer reads on a terminal. */

interface Row {
  [key: string]: unknown;
}

function table(rows: Row[], columns: string[]): string {
  if (rows.length === 0) return '(none)';
  const cells = rows.map((row) => columns.map((column) => formatCell(row[column])));
  const widths = columns.map((column, i) => Math.max(column.length, ...cells.map((cell) => (cell[i] ?? '').length)));
  const line = (values: string[]) =>
    values
      .map((value, i) => value.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...cells.map(line)].join('\n');
}

function formatCell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (Array.isArray(value)) return value.length === 0 ? '-' : value.join(',');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

export function printAdminResult(operation: string, result: unknown, options: { json?: boolean } = {}): void {
  if (options.json) {
    const rows = Array.isArray(result) ? result : [result];
    for (const row of rows) console.log(JSON.stringify(row));
    return;
  }
  const value = result as Row & Row[];
  switch (operation) {
    case 'agents.create':
      console.log(`Agent "${String(value.name)}" created (${String(value.id)}).`);
      console.log(`Callback signing secret, shown once: ${String(value.callbackSecret)}`);
      console.log('API key, shown once (the next line):');
      // The key alone on the last line, so `| tail -n 1` captures it.
      console.log(String(value.apiKey));
      return;
    case 'agents.list':
      console.log(table(value, ['name', 'id', 'keyPrefix', 'owners', 'operations', 'createdAt', 'revokedAt']));
      return;
    case 'agents.revoke':
      console.log(`Agent "${String(value.name)}" revoked at ${String(value.revokedAt)}.`);
      return;
    case 'proposals.list':
      console.log(table(value, ['id', 'status', 'operation', 'agent', 'expiresAt', 'summary']));
      return;
    case 'proposals.approve':
      console.log(
        `${String(value.id)}: ${String(value.outcome).replace('_', ' ')}; ${String(value.approvals)} of ${String(value.quorum)} approvals; status ${String(value.status)}`,
      );
      if (value.status === 'committed') console.log(`result: ${JSON.stringify(value.result)}`);
      if (value.error) console.log(`execution error: ${String(value.error)}`);
      if (value.grantId) console.log(`grant ${String(value.grantId)} given (see twokey grants list)`);
      return;
    case 'policy.test':
      for (const step of value.trace as Row[]) console.log(`rule ${String(step.rule)}: ${String(step.when)} → ${String(step.result)}`);
      console.log(
        `decision: ${String(value.decision)}${value.decidedBy ? ` by ${String(value.decidedBy)}` : ''}${value.reason ? ` (${String(value.reason)})` : ''}` +
          (value.decision === 'require' ? `; needs ${String(value.quorum)} of ${formatCell(value.approvers)}` : ''),
      );
      return;
    case 'grants.list':
      console.log(table(value, ['id', 'state', 'operation', 'agent', 'grantedBy', 'quorum', 'uses', 'bounds', 'expiresAt']));
      return;
    case 'grants.revoke':
      console.log(`grant ${String(value.id)} revoked at ${String(value.revokedAt)} after ${String(value.uses)} use(s)`);
      return;
    case 'proposals.reject':
      console.log(`${String(value.id)}: rejected${value.reason ? ` (${String(value.reason)})` : ''}`);
      return;
    case 'proposals.retry':
      console.log(`${String(value.id)}: status ${String(value.status)}`);
      if (value.status === 'committed') console.log(`result: ${JSON.stringify(value.result)}`);
      if (value.error) console.log(`execution error: ${String(value.error)}`);
      return;
    case 'audit.list':
      for (const event of value) {
        const target = [event.proposalId, event.agentId].filter(Boolean).join(' ');
        console.log(
          `${String(event.seq).padStart(6)}  ${String(event.at)}  ${String(event.type).padEnd(18)}  ${String(event.actor)}  ${target}  ${JSON.stringify(event.data)}`,
        );
      }
      return;
    case 'jobs.list':
      console.log(table(value, ['id', 'kind', 'status', 'attempts', 'target', 'runAt', 'lastError']));
      return;
    case 'jobs.retry':
      console.log(`job ${String(value.id)} (${String(value.kind)}) queued again`);
      return;
    case 'approvers.link':
      console.log(`One-time sign-in link to the web console for ${String(value.approver)} (works once, until ${String(value.expiresAt)}):`);
      if (Array.isArray(value.decides) && value.decides.length === 0) {
        console.log(`note: ${String(value.approver)} approves no operation in the config; they can look but not decide`);
      }
      // The link alone on the last line, so `| tail -n 1` captures it.
      console.log(String(value.url));
      return;
    case 'approvers.revoke-sessions':
      console.log(`${String(value.approver)}: ${String(value.sessions)} console session(s) ended, ${String(value.links)} unused sign-in link(s) cancelled.`);
      return;
    case 'audit.verify':
      console.log(
        value.ok
          ? `audit chain ok: ${String(value.rows)} rows verified` +
              (typeof value.checkpoints === 'number'
                ? `, consistent with ${String(value.checkpoints)} signed checkpoint(s) covering ${String(value.covered)} rows`
                : '') +
              (typeof value.pending === 'number' && value.pending > 0 ? ` (${String(value.pending)} newer rows not yet in the chain)` : '') +
              (typeof value.passkeyAssertions === 'number' && value.passkeyAssertions > 0
                ? `; ${String(value.passkeyAssertions)} passkey assertion(s) verified again`
                : '')
          : `audit chain BROKEN at row seq ${String(value.seq)}: ${String(value.reason)}`,
      );
      return;
    default:
      console.log(JSON.stringify(result, null, 2));
  }
}
