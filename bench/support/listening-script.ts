import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { EXECUTOR_SECRET, SLACK_APPROVER, SLACK_BOT_TOKEN, SLACK_CHANNEL, SLACK_SIGNING_SECRET, type World } from './world.js';

export interface ListeningScript {
  /** http://127.0.0.1:<port>, the port the script printed. */
  origin: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * One of the benchmarks' minimal servers (bench/support/minimal-*.ts) in a process of its own, so
 * that its CPU is counted apart from the benchmark's: started through tsx, ready once it prints
 * `listening <port>`; stopped with SIGTERM.
 */
export async function startListeningScript(name: string, env: Record<string, string>): Promise<ListeningScript> {
  const script = fileURLToPath(new URL(`./${name}.ts`, import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`${name} exited with ${String(code)} before it listened`);
  });
  const listening = (async () => {
    for await (const line of createInterface({ input: child.stdout! })) {
      const port = /^listening (\d+)$/.exec(line)?.[1];
      if (port) return port;
    }
    throw new Error(`${name} closed its output before it listened`);
  })();
  const port = await Promise.race([listening, exited]);
  return {
    origin: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    async stop() {
      child.kill('SIGTERM');
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

/** bench/support/minimal-chat-cycle.ts on `world`'s fakes and the database at `databaseUrl`, taking the agent key `apiKey`. */
export function startMinimalChatCycle(world: World, databaseUrl: string, apiKey: string): Promise<ListeningScript> {
  return startListeningScript('minimal-chat-cycle', {
    DATABASE_URL: databaseUrl,
    SLACK_API_URL: world.slack.url,
    SLACK_BOT_TOKEN,
    SLACK_SIGNING_SECRET,
    SLACK_CHANNEL,
    DOWNSTREAM_URL: world.downstream.url,
    EXECUTOR_SECRET,
    AGENT_KEY: apiKey,
    APPROVER: SLACK_APPROVER,
  });
}
