import { mkdir, open, readdir, readFile, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { AuditCheckpoint } from '../core/audit-chain.js';

/** Somewhere outside the database that keeps every checkpoint. */
export interface CheckpointSink {
  /** Stable name, recorded per checkpoint once this sink holds it. */
  name: string;
  publish(checkpoint: AuditCheckpoint): Promise<void>;
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
 */
export function webhookSink(url: string, timeoutMs = 5_000): CheckpointSink {
  return {
    name: 'webhook',
    async publish(checkpoint) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'twokey-checkpoint-key': checkpoint.keyId },
        body: JSON.stringify(checkpoint),
        signal: AbortSignal.timeout(timeoutMs),
      });
      await response.body?.cancel();
      if (!response.ok) throw new Error(`checkpoint webhook answered ${response.status}`);
    },
  };
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
