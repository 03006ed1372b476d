import * as z from 'zod';
import { readCheckpoints } from '../../audit/sinks.js';
import { indexCheckpoints, publicKeyFromText } from '../../core/audit-chain.js';
import { TwokeyError } from '../../core/errors.js';
import { defineCommand } from '../command.js';
import type { AdminServices } from '../ports.js';

/** The audit log: read it, and prove it is whole. */

/** How many rows one `audit.list` answers; the CLI asks again from the last `seq` while it gets this many. */
export const AUDIT_PAGE = 500;

export const auditList = defineCommand({
  name: 'audit.list',
  input: z.strictObject({ afterSeq: z.number().int().nonnegative().optional() }),
  output: z.array(
    z.looseObject({
      seq: z.number().nullable(),
      at: z.string(),
      type: z.string(),
      actor: z.string(),
      proposalId: z.string().nullable(),
      agentId: z.string().nullable(),
      data: z.record(z.string(), z.unknown()),
    }),
  ),
  async run(services, input) {
    const events = await services.audit.list({ afterSeq: input.afterSeq ?? 0, limit: AUDIT_PAGE });
    return events.map((event) => ({ ...event, at: event.at.toISOString() }));
  },
  print: (events) =>
    events
      .map((event) => {
        const target = [event.proposalId, event.agentId].filter(Boolean).join(' ');
        return `${String(event.seq).padStart(6)}  ${event.at}  ${event.type.padEnd(18)}  ${event.actor}  ${target}  ${JSON.stringify(event.data)}`;
      })
      .join('\n'),
});

/** `--public-key` texts to indexed checkpoints; the file or directory is read where the command runs. */
async function publishedCheckpoints(path: string, keyTexts: readonly string[]) {
  if (keyTexts.length === 0)
    throw new TwokeyError('invalid_request', 'no trusted public key: pass --public-key KEY (from `twokey audit key`) or set TWOKEY_AUDIT_PUBLIC_KEY');
  let keys;
  try {
    keys = keyTexts.map(publicKeyFromText);
  } catch (error) {
    throw new TwokeyError('invalid_request', `--public-key: ${(error as Error).message}`);
  }
  try {
    return indexCheckpoints(await readCheckpoints(path), keys);
  } catch (error) {
    throw new TwokeyError('invalid_request', `--checkpoints: ${(error as Error).message}`);
  }
}

/**
 * The chain verdict, and the passkey assertions stored with step-up approvals checked again: a
 * broken assertion makes the whole verdict not ok, named by its audit row.
 */
async function withPasskeyRecheck<T extends { ok: boolean }>(services: AdminServices, verdict: T) {
  // Loaded where the command runs (WebAuthn verification), never in the CLI that only prints.
  const { recheckAssertions } = await import('../../passkeys/recheck.js');
  const passkeys = await recheckAssertions(services.audit.events(), {
    passkey: (id) => services.passkeyStore.get(id),
    proposal: (id) => services.store.getProposal(id),
  });
  if (!passkeys.failed || !verdict.ok) return { ...verdict, passkeyAssertions: passkeys.checked };
  const { seq, proposalId, reason } = passkeys.failed;
  return {
    ...verdict,
    ok: false,
    passkeyAssertions: passkeys.checked,
    seq,
    reason: `the passkey assertion approving ${proposalId ?? 'a proposal'} does not hold: ${reason}`,
  };
}

export const auditVerify = defineCommand({
  name: 'audit.verify',
  input: z.strictObject({ checkpoints: z.string().optional(), publicKeys: z.array(z.string()).optional() }),
  output: z.object({
    ok: z.boolean(),
    rows: z.number(),
    /** Rows written but not yet placed in the chain. */
    pending: z.number(),
    checkpoints: z.number().optional(),
    covered: z.number().optional(),
    signedAt: z.string().optional(),
    /** A broken chain: the first bad row and why (no row when a passkey assertion's row is unknown). */
    seq: z.number().nullable().optional(),
    reason: z.string().optional(),
    /** Passkey assertions stored with step-up approvals, verified again against their stored public keys. */
    passkeyAssertions: z.number().optional(),
  }),
  async run(services, input) {
    const pending = await services.auditLog.pendingCount();
    const published = input.checkpoints ? await publishedCheckpoints(input.checkpoints, input.publicKeys ?? []) : undefined;
    return withPasskeyRecheck(services, { ...(await services.audit.verify(published)), pending });
  },
  print: (verdict) =>
    verdict.ok
      ? `audit chain ok: ${verdict.rows} rows verified` +
        (typeof verdict.checkpoints === 'number'
          ? `, consistent with ${verdict.checkpoints} signed checkpoint(s) covering ${String(verdict.covered)} rows`
          : '') +
        (verdict.pending > 0 ? ` (${verdict.pending} newer rows not yet in the chain)` : '') +
        (verdict.passkeyAssertions ? `; ${verdict.passkeyAssertions} passkey assertion(s) verified again` : '')
      : `audit chain BROKEN at row seq ${String(verdict.seq)}: ${String(verdict.reason)}`,
  failed: (verdict) => !verdict.ok,
});
