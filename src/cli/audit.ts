import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { createSigner, defaultKeyFile, loadOrCreateKeyFile, parseAuditKey } from '../config/audit-key.js';
import { AUDIT_PAGE } from '../admin/commands/audit.js';
import type { Env } from '../config/env.js';
import { publicKeyText } from '../core/audit-chain.js';
import { execute, printAnswer, runAndPrint } from './admin.js';

/** `twokey audit`: the log, page after page (and on, with --follow), and the proofs that it is whole. */

export async function printAuditLog(env: Env, options: { follow?: boolean; json?: boolean }): Promise<void> {
  let afterSeq = 0;
  for (;;) {
    const events = await execute(env, 'audit.list', { afterSeq });
    printAnswer('audit.list', events, options);
    afterSeq = events.at(-1)?.seq ?? afterSeq;
    if (events.length === AUDIT_PAGE) continue;
    if (!options.follow) return;
    await new Promise((done) => setTimeout(done, 1_000));
  }
}

/** `audit verify --checkpoints` passed, but against the key beside the data rather than a pinned one. */
const UNPINNED_EXIT_CODE = 3;

export async function verifyAudit(env: Env, options: { checkpoints?: string; publicKey: string[] }): Promise<void> {
  const pinned = options.publicKey.length > 0 ? options.publicKey : (env.TWOKEY_AUDIT_PUBLIC_KEY ?? []);
  // Without a pinned key, the only key at hand is the one beside the data: whoever rewrote the
  // table may have replaced it too. Checked anyway, but said loudly and never exit 0.
  const unpinned = options.checkpoints !== undefined && pinned.length === 0;
  const publicKeys = unpinned ? [localAuditPublicKey(env)].filter((key) => key !== null) : pinned;
  if (unpinned) console.error(unpinnedKeyWarning(env));
  const checkpoints = options.checkpoints ? resolve(options.checkpoints) : undefined;
  const verdict = await runAndPrint(env, 'audit.verify', { checkpoints, publicKeys });
  if (verdict.ok && unpinned) {
    console.error('twokey: exit 3: consistent with the checkpoints, but only against the local key; pin one to make this a proof.');
    process.exitCode = UNPINNED_EXIT_CODE;
  }
}

function unpinnedKeyWarning(env: Env): string {
  const where = env.TWOKEY_AUDIT_KEY ? 'derived from TWOKEY_AUDIT_KEY' : `read from ${env.TWOKEY_AUDIT_KEY_FILE ?? defaultKeyFile(env.TWOKEY_DATA_DIR)}`;
  return [
    'twokey: WARNING: NO PINNED PUBLIC KEY.',
    `  The checkpoints are checked against the key ${where}, on this machine, beside the data.`,
    '  Whoever could rewrite the audit table may have replaced that key and re-signed every checkpoint: a pass proves nothing.',
    '  Pin the key you recorded when twokey was set up (`twokey audit key` printed it):',
    '    twokey audit verify --checkpoints DIR --public-key KEY    or set TWOKEY_AUDIT_PUBLIC_KEY',
  ].join('\n');
}

/** The public half of the checkpoint key configured here, without creating a key file unless asked. */
export function localAuditPublicKey(env: Env, options: { create?: boolean } = {}): string | null {
  if (env.TWOKEY_AUDIT_KEY) return publicKeyText(createSigner(parseAuditKey(env.TWOKEY_AUDIT_KEY)).publicKey);
  const file = env.TWOKEY_AUDIT_KEY_FILE ?? defaultKeyFile(env.TWOKEY_DATA_DIR);
  if (!options.create && !existsSync(file)) return null;
  return publicKeyText(createSigner(loadOrCreateKeyFile(file)).publicKey);
}
