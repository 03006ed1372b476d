import { mkdir, open, readdir, readFile, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { AuditAlert, AuditCheckpoint } from '../core/audit-chain.js';

/** Somewhere outside the database that keeps every checkpoint. */
export interface CheckpointSink {
  /** Stable name, recorded per checkpoint once this sink holds it. */
  name: string;
  publish(checkpoint: AuditCheckpoint): Promise<void>;
  /** Tells someone outside that the integrator refused to sign (a sink that reaches a person). */
  alert?(alert: AuditAlert): Promise<void>;
}

export const CHECKPOINT_FILE = 'checkpoints.jsonl';

export const defaultCheckpointDir = (dataDir: string): string => `${resolve(dataDir)}.audit-checkpoints`;

/**
 * Appends one JSON line per checkpoint to DIR/checkpoints.jsonl and syncs it before the checkpoint
 * counts as published. A crash between the write and the mark writes the line twice: readers
 * accept identical duplicates.
 */
export function directorySink(dir: string): CheckpointSink {
  let ready: Promise<unknown> | null = null;
  return {
    name: 'dir',
    async publish(checkpoint) {
      ready ??= mkdir(dir, { recursive: true, mode: 0o700 });
      await ready;
      const file = await open(join(dir, CHECKPOINT_FILE), 'a', 0o600);
      try {
        await file.write(`${JSON.stringify(checkpoint)}\n`);
        await file.sync();
      } finally {
        await file.close();
      }
    },
  };
}

/**
 * POSTs each checkpoint as JSON. The body carries its own Ed25519 signature, so the receiver checks
 * it with the public key alone (`twokey audit key`), and a proxy in between cannot forge one.
 * Alerts go to the same URL, told apart by their `origin` and the `twokey-audit-alert` header.
 */
export function webhookSink(url: string, timeoutMs = 5_000): CheckpointSink {
  const post = async (body: AuditCheckpoint | AuditAlert, headers: Record<string, string>) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'twokey-checkpoint-key': body.keyId, ...headers },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    await response.body?.cancel();
    if (!response.ok) throw new Error(`checkpoint webhook answered ${response.status}`);
  };
  return {
    name: 'webhook',
    publish: (checkpoint) => post(checkpoint, {}),
    alert: (alert) => post(alert, { 'twokey-audit-alert': alert.kind }),
  };
}

/** Read backwards in steps this large until the tail holds a whole line (a line of 1,000 hashes is ~66 KB). */
const TAIL_STEP_BYTES = 64 * 1024;

/**
 * The newest checkpoint a directory sink holds: the last whole line of DIR/checkpoints.jsonl that is
 * a checkpoint, read from the end of the file (it grows by a line per batch; reading it all would
 * cost more every day). null when the file does not exist or holds none.
 */
export async function readNewestCheckpoint(dir: string): Promise<AuditCheckpoint | null> {
  let file;
  try {
    file = await open(join(dir, CHECKPOINT_FILE), 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    let end = (await file.stat()).size;
    let tail = Buffer.alloc(0);
    while (end > 0) {
      const length = Math.min(TAIL_STEP_BYTES, end);
      const chunk = Buffer.alloc(length);
      await file.read(chunk, 0, length, end - length);
      end -= length;
      tail = Buffer.concat([chunk, tail]);
      // Lines before the first newline may be cut short, unless the file starts there.
      const lines = tail.toString('utf8').split('\n');
      const whole = end === 0 ? lines : lines.slice(1);
      // A crash mid-append can leave a torn last line: the line before it is then the newest.
      for (const line of whole.reverse()) {
        const checkpoint = parseCheckpointLine(line);
        if (checkpoint) return checkpoint;
      }
    }
    return null;
  } finally {
    await file.close();
  }
}

function parseCheckpointLine(line: string): AuditCheckpoint | null {
  if (line.trim() === '') return null;
  try {
    const value: unknown = JSON.parse(line);
    return isCheckpoint(value) ? value : null;
  } catch {
    return null;
  }
}

const isCheckpoint = (value: unknown): value is AuditCheckpoint => {
  const c = value as Partial<AuditCheckpoint> | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.size === 'number' &&
    typeof c.from === 'number' &&
    typeof c.head === 'string' &&
    Array.isArray(c.hashes) &&
    c.hashes.every((hash) => typeof hash === 'string') &&
    typeof c.timestamp === 'string' &&
    typeof c.keyId === 'string' &&
    typeof c.signature === 'string'
  );
};

/**
 * Reads published checkpoints from a .jsonl/.json file, or from every such file under a directory
 * (one replica's sink per subdirectory, say).
 */
export async function readCheckpoints(path: string): Promise<AuditCheckpoint[]> {
  const files = (await stat(path)).isDirectory()
    ? (await readdir(path, { recursive: true }))
        .filter((name) => /\.jsonl?$/.test(name))
        .sort()
        .map((name) => join(path, name))
    : [path];
  const checkpoints: AuditCheckpoint[] = [];
  for (const file of files) {
    const lines = (await readFile(file, 'utf8')).split('\n');
    for (const [index, line] of lines.entries()) {
      if (line.trim() === '') continue;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        throw new Error(`${file}:${index + 1} is not JSON`);
      }
      for (const item of Array.isArray(value) ? value : [value]) {
        if (!isCheckpoint(item)) throw new Error(`${file}:${index + 1} is not an audit checkpoint`);
        checkpoints.push(item);
      }
    }
  }
  return checkpoints;
}
