import * as z from 'zod';
import { readCheckpoints } from '../../audit/sinks.js';
import { indexCheckpoints, publicKeyFromText } from '../../core/audit-chain.js';
import { TwokeyError } from '../../core/errors.js';
import { defineCommand } from '../command.js';

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
    /** A broken chain: the first bad row and why. */
    seq: z.number().optional(),
    reason: z.string().optional(),
  }),
  async run(services, input) {
    const pending = await services.auditLog.pendingCount();
    const published = input.checkpoints ? await publishedCheckpoints(input.checkpoints, input.publicKeys ?? []) : undefined;
    return { ...(await services.audit.verify(published)), pending };
  },
  print: (verdict) =>
    verdict.ok
      ? `audit chain ok: ${verdict.rows} rows verified` +
        (typeof verdict.checkpoints === 'number'
          ? `, consistent with ${verdict.checkpoints} signed checkpoint(s) covering ${String(verdict.covered)} rows`
          : '') +
        (verdict.pending > 0 ? ` (${verdict.pending} newer rows not yet in the chain)` : '')
      : `audit chain BROKEN at row seq ${String(verdict.seq)}: ${String(verdict.reason)}`,
  failed: (verdict) => !verdict.ok,
});
