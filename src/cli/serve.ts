import type { Env } from '../config/env.js';
import { handleProcessFaults } from '../runtime/process-faults.js';
import { startTwokey } from '../runtime/server.js';
import { watchdogFromEnv } from '../runtime/watchdog.js';
import { startTelemetry } from '../tracing/sdk.js';

/** `twokey serve`: the gateway, until SIGINT or SIGTERM. The only command that loads the server. */
export async function serve(settings: Env, version: string): Promise<void> {
  // Before anything creates a span: OTEL_EXPORTER_OTLP_ENDPOINT alone turns tracing on.
  const telemetry = await startTelemetry(process.env, version);
  // Printed, not logged: the logger would (rightly) scrub the sign-in token out of it.
  // A sign-in link is for the person at this terminal, never for the log stream (stdout is often
  // collected): printed on stderr when it is a terminal, otherwise not at all.
  const announceConsole = process.stderr.isTTY ? (text: string) => void process.stderr.write(text) : undefined;
  const running = await startTwokey({ env: settings, ...(announceConsole ? { announceConsole } : {}) });
  // From here on: opening a new embedded database legitimately holds the loop for seconds.
  watchdogFromEnv(settings);
  // A database driver's error is survived; anything else that nothing caught ends the process.
  handleProcessFaults({ logger: running.logger });
  // The spans still buffered go out after the last request is answered.
  const stop = () =>
    void running.close().then(async () => {
      await telemetry?.shutdown().catch((error: unknown) => running.logger.warn({ err: error }, 'could not send the last traces'));
      process.exit(0);
    });
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
