import type { Env } from '../config/env.js';
import { raiseWasmTieringBudget } from '../db/wasm-tiering.js';

/**
 * The database opens first, while the server's modules load: compiling the embedded database's
 * WebAssembly and reading its files overlap with loading and compiling JavaScript, where one after
 * the other they were most of a start.
 */
async function startOpeningDatabase(settings: Env) {
  const [{ openDatabase }, { heldStorageLog }] = await Promise.all([import('../db/database.js'), import('../db/embedded-storage.js')]);
  const log = heldStorageLog();
  const database = openDatabase({
    databaseUrl: settings.DATABASE_URL,
    dataDir: settings.TWOKEY_DATA_DIR,
    storage: { minFreeBytes: settings.TWOKEY_MIN_FREE_DISK_MB * 1024 * 1024, log },
  });
  // Awaited by the server once its configuration is read; a failure meanwhile is reported there.
  database.catch(() => undefined);
  return { database, log };
}

/** `twokey serve`: the gateway, until SIGINT or SIGTERM. The only command that loads the server. */
export async function serve(settings: Env, version: string): Promise<void> {
  raiseWasmTieringBudget();
  // Listening for the signals before anything starts: a SIGTERM while the server starts (after it
  // began listening, while it released a dead process's claims, say) would otherwise end it at once,
  // cutting the requests it had taken. It is kept and honoured as soon as there is a server to close;
  // a second signal ends a start that does not finish.
  let stopRequested = false;
  let stopNow: (() => void) | null = null;
  const onSignal = () => {
    if (stopNow) return stopNow();
    if (stopRequested) process.exit(1);
    stopRequested = true;
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const openingDatabase = await startOpeningDatabase(settings);
  const [{ handleProcessFaults }, { startTwokey }, { watchdogFromEnv }, { startTelemetry }] = await Promise.all([
    import('../runtime/process-faults.js'),
    import('../runtime/server.js'),
    import('../runtime/watchdog.js'),
    import('../tracing/sdk.js'),
  ]);
  // Before the server creates a span (opening the database makes none): OTEL_EXPORTER_OTLP_ENDPOINT alone turns tracing on.
  const telemetry = await startTelemetry(process.env, version);
  // Printed, not logged: the logger would (rightly) scrub the sign-in token out of it.
  // A sign-in link is for the person at this terminal, never for the log stream (stdout is often
  // collected): printed on stderr when it is a terminal, otherwise not at all.
  const announceConsole = process.stderr.isTTY ? (text: string) => void process.stderr.write(text) : undefined;
  const running = await startTwokey({ env: settings, openingDatabase, ...(announceConsole ? { announceConsole } : {}) });
  // From here on: opening a new embedded database legitimately holds the loop for seconds.
  watchdogFromEnv(settings);
  // A database driver's error is survived; anything else that nothing caught ends the process.
  handleProcessFaults({ logger: running.logger });
  // The spans still buffered go out after the last request is answered. A second signal while
  // closing changes nothing: close() is one promise however often it is asked for.
  stopNow = () =>
    void running.close().then(async () => {
      await telemetry?.shutdown().catch((error: unknown) => running.logger.warn({ err: error }, 'could not send the last traces'));
      process.exit(0);
    });
  if (stopRequested) stopNow();
}
