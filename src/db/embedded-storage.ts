import { statfs } from 'node:fs/promises';
import type { PGlite } from '@electric-sql/pglite';
import { TwokeyError } from '../core/errors.js';

/**
 * The embedded database's disk, guarded so that running out of space fails closed and loud and
 * heals by itself:
 *
 * - Free space is read at start and every second (`fs.statfs` on the data directory). Below the
 *   threshold the session turns read-only (`default_transaction_read_only`): PostgreSQL itself
 *   refuses every write, which twokey answers `507 insufficient_storage`, while reads go on. Once
 *   space is back, writes are accepted again. Each change is logged once.
 * - A write that hits a full disk before the next reading is refused the same way (SQLSTATE 53100
 *   "could not extend file"), and triggers a reading at once.
 * - A full disk while PostgreSQL needs a new WAL segment is a PANIC. Tried on PGlite 0.5: the next
 *   statement sent to that backend spins forever in WebAssembly on the main thread — the event loop
 *   never turns again, `/healthz` goes silent at full CPU, and freeing space does not help. So
 *   nothing is ever sent to a backend after a PANIC (or FATAL): it is set aside, every statement
 *   is refused at once, and a new PGlite is opened on the same directory (crash recovery from the
 *   WAL, nothing committed is lost) once space is back.
 */

export interface StorageLog {
  error(details: object, message: string): void;
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

/**
 * A log for a database opened before the process's logger exists (`serve` opens it while the server
 * loads): lines wait until `attach` names where they go, then pass straight through.
 */
export function heldStorageLog(): StorageLog & { attach(log: StorageLog): void } {
  let target: StorageLog | null = null;
  const held: Array<[keyof StorageLog, object, string]> = [];
  const line = (level: keyof StorageLog) => (details: object, message: string) => {
    if (target) target[level](details, message);
    else held.push([level, details, message]);
  };
  return {
    error: line('error'),
    warn: line('warn'),
    info: line('info'),
    attach(log) {
      target = log;
      for (const [level, details, message] of held.splice(0)) log[level](details, message);
    },
  };
}

export interface EmbeddedStorageOptions {
  /** The data directory; its filesystem is the one measured. */
  dataDir: string;
  /** Below this many free bytes writes are refused; 0 leaves only a full disk to refuse them. */
  minFreeBytes: number;
  log: StorageLog;
  /** How often free space is read while running (default 1 s). */
  checkIntervalMs?: number;
  /** Free bytes for an unprivileged user on the filesystem of `path` (default `fs.statfs`). */
  freeBytes?(path: string): Promise<number>;
}

export interface EmbeddedStorage {
  /** What drizzle is given: always the live PGlite, a new one after a PANIC. */
  client: PGlite;
  current(): PGlite;
  /** Why writes are refused now (for readiness), or null when they are accepted. */
  problem(): string | null;
  /** Starts reading free space: once now, then every `checkIntervalMs`. */
  start(): Promise<void>;
  /** Reads free space now and acts on it. */
  check(): Promise<void>;
  close(): Promise<void>;
}

const DISK_FULL = '53100';
const READ_ONLY_TRANSACTION = '25006';
const MIB = 1024 * 1024;

type State = { kind: 'ok' } | { kind: 'low'; freeBytes: number } | { kind: 'stopped'; refusal: TwokeyError };

const sqlStateOf = (error: unknown): string | undefined =>
  typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : undefined;

const severityOf = (error: unknown): string | undefined =>
  typeof error === 'object' && error !== null && 'severity' in error && typeof error.severity === 'string' ? error.severity : undefined;

const outOfSpace = () =>
  new TwokeyError('insufficient_storage', 'twokey is short of disk space for its database; writes are refused until space is freed, then resume by themselves');

async function statfsFreeBytes(path: string): Promise<number> {
  const stats = await statfs(path);
  return stats.bavail * stats.bsize;
}

/** A start that failed on a full disk says so: PGlite's own message is only that it failed to initialise. */
export async function explainOpenFailure(error: unknown, dataDir: string, minFreeBytes: number): Promise<unknown> {
  const free = await statfsFreeBytes(dataDir).catch(() => null);
  // A new database directory needs about 40 MiB; a WAL segment 16 MiB.
  if (free === null || free >= Math.max(minFreeBytes, 64 * MIB)) return error;
  return new Error(`the embedded database could not open: ${Math.floor(free / MIB)} MiB free on the disk of ${dataDir}; free some space and start again`, {
    cause: error,
  });
}

/**
 * Wraps the statement path of one PGlite instance: after a PANIC or FATAL nothing more reaches its
 * backend. `execProtocolRawSync` is where every message goes in (PGlite's own BEGIN, ROLLBACK and
 * Sync too); `execProtocol` and `execProtocolStream` are where its errors come out.
 */
function guardInstance(instance: PGlite, onError: (error: unknown) => unknown, stopped: (refusal: TwokeyError) => void): void {
  let refusal: TwokeyError | null = null;
  const rawSync = instance.execProtocolRawSync.bind(instance);
  instance.execProtocolRawSync = (message) => {
    if (refusal) throw refusal;
    return rawSync(message);
  };
  const failed = (error: unknown): unknown => {
    const severity = severityOf(error);
    if (severity !== 'PANIC' && severity !== 'FATAL') return onError(error);
    refusal ??=
      sqlStateOf(error) === DISK_FULL
        ? outOfSpace()
        : new TwokeyError('unavailable', 'the embedded database stopped; twokey is reopening it, try again shortly');
    stopped(refusal);
    return refusal;
  };
  const protocol = instance.execProtocol.bind(instance);
  instance.execProtocol = (message, options) => protocol(message, options).catch((error: unknown) => Promise.reject(failed(error)));
  const stream = instance.execProtocolStream.bind(instance);
  instance.execProtocolStream = (message, options) => stream(message, options).catch((error: unknown) => Promise.reject(failed(error)));
}

/**
 * Guards `first` at once (so a PANIC during the migrations cannot hang start either); free space is
 * read from `start()` on. `reopen` opens a new PGlite on the same directory.
 */
export function createEmbeddedStorage(first: PGlite, reopen: () => Promise<PGlite>, options: EmbeddedStorageOptions): EmbeddedStorage {
  const { dataDir, minFreeBytes, log } = options;
  const freeBytes = options.freeBytes ?? statfsFreeBytes;
  let current = first;
  let state: State = { kind: 'ok' };
  let timer: NodeJS.Timeout | null = null;
  let checking: Promise<void> | null = null;
  let reopenFailed = false;
  const details = (free: number) => ({ dataDir, freeMiB: Math.floor(free / MIB), minFreeMiB: Math.floor(minFreeBytes / MIB) });

  function translate(error: unknown): unknown {
    const code = sqlStateOf(error);
    if (code === DISK_FULL) {
      // Full before the next reading: refuse, and read now so the state says so.
      void check();
      return outOfSpace();
    }
    return code === READ_ONLY_TRANSACTION && state.kind === 'low' ? outOfSpace() : error;
  }

  function stopped(refusal: TwokeyError): void {
    if (state.kind === 'stopped') return;
    state = { kind: 'stopped', refusal };
    log.error(
      { dataDir, code: refusal.code },
      'the embedded database stopped on a fatal error (disk full?); every request to it is refused until it is reopened',
    );
    void check();
  }

  function guard(instance: PGlite): PGlite {
    guardInstance(instance, translate, (refusal) => {
      if (instance === current) stopped(refusal);
    });
    return instance;
  }

  async function setReadOnly(on: boolean): Promise<void> {
    await current.exec(`set default_transaction_read_only = ${on ? 'on' : 'off'}`);
  }

  async function reopenWhenSpace(free: number): Promise<void> {
    if (free < Math.max(minFreeBytes, 1)) return;
    try {
      // The stopped instance is never closed: closing sends to its backend too. It is dropped.
      current = guard(await reopen());
    } catch (error) {
      if (!reopenFailed) log.warn({ err: error, ...details(free) }, 'could not reopen the embedded database yet; trying again every check');
      reopenFailed = true;
      return;
    }
    reopenFailed = false;
    state = { kind: 'ok' };
    log.info(details(free), 'the embedded database is open again; writes are accepted');
  }

  async function runCheck(): Promise<void> {
    let free: number;
    try {
      free = await freeBytes(dataDir);
    } catch (error) {
      log.warn({ err: error, dataDir }, 'could not read the free space of the data directory');
      return;
    }
    if (state.kind === 'stopped') return reopenWhenSpace(free);
    const low = free < minFreeBytes;
    if (low && state.kind === 'ok') {
      // The state first: a write refused by the read-only session must already read as "low".
      state = { kind: 'low', freeBytes: free };
      log.error(details(free), 'the embedded database is short of disk space: writes are refused (507) and /readyz answers 503 until space is freed');
      await setReadOnly(true).catch(() => undefined);
    } else if (low && state.kind === 'low') {
      state = { kind: 'low', freeBytes: free };
    } else if (!low && state.kind === 'low') {
      await setReadOnly(false);
      state = { kind: 'ok' };
      log.info(details(free), 'disk space is back: the embedded database accepts writes again');
    }
  }

  function check(): Promise<void> {
    checking ??= runCheck()
      .catch((error: unknown) => log.warn({ err: error, dataDir }, 'the disk space check failed'))
      .finally(() => {
        checking = null;
      });
    return checking;
  }

  guard(first);
  // Bound to whichever instance is live, since PGlite's methods read its private fields.
  const client = new Proxy(first, {
    get(_target, property) {
      const live = current;
      const value: unknown = Reflect.get(live, property, live);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(live) : value;
    },
  });

  return {
    client,
    current: () => current,
    problem() {
      if (state.kind === 'low') return 'insufficient storage: writes are refused until disk space is freed';
      if (state.kind === 'stopped') return `the embedded database stopped (${state.refusal.code}); it reopens once disk space is freed`;
      return null;
    },
    async start() {
      await check();
      timer ??= setInterval(() => void check(), options.checkIntervalMs ?? 1_000);
      // A reading must never keep a finished process alive.
      timer.unref();
    },
    check,
    async close() {
      if (timer) clearInterval(timer);
      timer = null;
      await checking;
      if (state.kind !== 'stopped') await current.close();
    },
  };
}
