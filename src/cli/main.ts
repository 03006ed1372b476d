import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command, Option } from 'commander';
import { createSigner, defaultKeyFile, loadOrCreateKeyFile, parseAuditKey } from '../audit/key.js';
import { publicKeyText } from '../core/audit-chain.js';
import { callAdminSocket } from '../admin/socket.js';
import { runAdminOperation } from '../admin/operations.js';
import { publicBaseUrl } from '../console/urls.js';
import { loadConfigFile, resolveConfigPath } from '../config/config-file.js';
import { loadEnv, type Env } from '../config/env.js';
import { ConfigError } from '../config/errors.js';
import { isDataDirLocked, openDatabase } from '../db/database.js';
import { handleProcessFaults } from '../runtime/process-faults.js';
import { startTwokey } from '../runtime/server.js';
import { watchdogFromEnv } from '../runtime/watchdog.js';
import { createServices } from '../runtime/services.js';
import { printAdminResult } from './output.js';
import { checkTwokey, serveStdioProxy } from '../mcp/stdio-proxy.js';
import { createUpstreamClients, withUpstreamOperations } from '../mcp/upstreams.js';
import { startTelemetry } from '../tracing/sdk.js';
import { systemErrorText } from '../lib/system-errors.js';
import { explainFailure } from './start-errors.js';

/** This package's version (`twokey --version`, the traces' `service.version`); dist/cli and src/cli both sit two levels down. */
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * Reads `.env` from the working directory when there is one, as `npm start` users expect from
 * `.env.example`. A variable already set in the environment keeps its value: the file only fills gaps.
 */
function loadDotEnv(path = '.env'): void {
  try {
    process.loadEnvFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    // Node reports a directory named .env as an invalid argument.
    const reason = code === 'EISDIR' || code === 'ERR_INVALID_ARG_TYPE' ? 'it is not a file' : systemErrorText(code ?? 'unreadable');
    throw new ConfigError(`cannot read ${resolve(path)}: ${reason}`, []);
  }
}

/**
 * Runs one operator operation where the data lives: directly on PostgreSQL, directly on an idle
 * embedded database, or through the admin socket of the server that holds the embedded database.
 */
async function runOperation(env: Env, operation: string, args: Record<string, unknown> = {}): Promise<unknown> {
  if (!env.DATABASE_URL && (await isDataDirLocked(env.TWOKEY_DATA_DIR))) {
    return callAdminSocket(env.TWOKEY_DATA_DIR, operation, args);
  }
  const upstreamClients = createUpstreamClients();
  try {
    // Proposals of upstream tools are decided (and run) here too: the CLI needs those operations.
    const config = await withUpstreamOperations(loadConfigFile(resolveConfigPath(env), process.env), upstreamClients);
    const database = await openDatabase({ databaseUrl: env.DATABASE_URL, dataDir: env.TWOKEY_DATA_DIR, poolSize: 2 });
    try {
      return await runAdminOperation(createServices({ database, config, upstreamClients }), operation, args);
    } finally {
      await database.close();
    }
  } finally {
    await upstreamClients.closeAll();
  }
}

const collect = (value: string, previous: string[]) => [...previous, value];
const commaList = (value: string) =>
  value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);

type Run = (operation: string, args?: Record<string, unknown>, options?: { json?: boolean }) => Promise<void>;

function buildProgram(env: () => Env): Command {
  const program = new Command('twokey')
    .description('Two-key approval bridge for AI agents')
    .version(VERSION, '-V, --version', 'print the version')
    .showHelpAfterError();
  const run: Run = (operation, args, options = {}) => runOperation(env(), operation, args).then((result) => printAdminResult(operation, result, options));
  addProcessCommands(program, env);
  addAgentAndProposalCommands(program, env, run);
  addPolicyAndGrantCommands(program, run);
  addOperatorCommands(program, env, run);
  addAuditCommands(program, env);
  return program;
}

/** Commands that run a process: the gateway, the MCP stdio proxy, the migrations. */
function addProcessCommands(program: Command, env: () => Env): void {
  program
    .command('serve')
    .description('start the gateway (what `npm start` runs)')
    .action(async () => {
      const settings = env();
      // Before anything creates a span: OTEL_EXPORTER_OTLP_ENDPOINT alone turns tracing on.
      const telemetry = await startTelemetry(process.env, VERSION);
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
    });

  program
    .command('mcp')
    .description("serve the agent's gated tools over stdio (MCP), forwarding to a running twokey: TWOKEY_URL, TWOKEY_AGENT_KEY")
    .action(async () => {
      const apiKey = process.env.TWOKEY_AGENT_KEY;
      if (!apiKey) {
        console.error("twokey mcp: set TWOKEY_AGENT_KEY to the agent's API key (tk_agent_…)");
        process.exit(2);
      }
      const options = { url: process.env.TWOKEY_URL || 'http://127.0.0.1:8080', apiKey };
      // stdout carries the protocol: every word for people goes to stderr.
      await checkTwokey(options).catch((error: unknown) => {
        console.error(`twokey mcp: cannot use ${options.url}/mcp: ${error instanceof Error ? error.message : String(error)}`);
        process.exit(1);
      });
      const proxy = await serveStdioProxy(options);
      const stop = () => void proxy.close().then(() => process.exit(0));
      process.stdin.once('end', stop);
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });

  program
    .command('migrate')
    .description('apply database migrations and exit')
    .action(async () => {
      const current = env();
      const database = await openDatabase({ databaseUrl: current.DATABASE_URL, dataDir: current.TWOKEY_DATA_DIR, poolSize: 1 });
      await database.close();
      console.log(`migrations applied (${database.kind})`);
    });
}

function addAgentAndProposalCommands(program: Command, env: () => Env, run: Run): void {
  const agents = program.command('agents').description('manage agents and their API keys');
  agents
    .command('create')
    .argument('<name>')
    .option('--owner <identity>', 'a human behind the agent (repeatable); owners can never approve its proposals', collect, [])
    .option('--operations <names>', 'comma-separated operations the agent may propose (default: all)', commaList)
    .description('create an agent; prints its callback secret, then its API key as the last line')
    .action((name: string, options: { owner: string[]; operations?: string[] }) =>
      run('agents.create', { name, owners: options.owner, operations: options.operations }),
    );
  agents
    .command('list')
    .description('list agents')
    .action(() => run('agents.list'));
  agents
    .command('revoke')
    .argument('<name>')
    .description("revoke an agent's API key")
    .action((name: string) => run('agents.revoke', { name }));

  const proposals = program.command('proposals').description('list and decide proposals');
  proposals
    .command('list')
    .addOption(new Option('--status <status>', 'only proposals in this status'))
    .action((options: { status?: string }) => run('proposals.list', { status: options.status }));
  proposals
    .command('approve')
    .argument('<id>')
    .requiredOption('--as <identity>', 'the approver identity you act as (slack:U…, discord:user:…, web:NAME)')
    .option('--grant <duration>', 'and approve the same operation for this agent for this long (15m, 1h…)')
    .option('--uses <n>', 'with --grant: at most this many proposals')
    .option('--bounded', "with --grant: only params up to (numbers) or equal to (the rest) this proposal's")
    .description('approve a proposal as an approver (same rules as a chat click)')
    .action((id: string, options: { as: string; grant?: string; uses?: string; bounded?: boolean }) =>
      run('proposals.approve', { id, as: options.as, grant: options.grant, uses: options.uses, bounded: options.bounded === true }),
    );
  proposals
    .command('reject')
    .argument('<id>')
    .requiredOption('--as <identity>', 'the approver identity you act as (slack:U…, discord:user:…, web:NAME)')
    .option('--reason <reason>', 'why (shown to the agent and in chat)')
    .description('reject a proposal as an approver (same rules as a chat click)')
    .action((id: string, options: { as: string; reason?: string }) => run('proposals.reject', { id, as: options.as, reason: options.reason }));

  proposals
    .command('retry')
    .argument('<id>')
    .requiredOption('--as <identity>', 'the approver identity you act as (slack:U…, discord:user:…, web:NAME)')
    .description('run an approved proposal again after its execution failed (same rules and idempotency key as the chat Retry button)')
    .action(async (id: string, options: { as: string }) => {
      const result = (await runOperation(env(), 'proposals.retry', { id, as: options.as })) as { status: string };
      printAdminResult('proposals.retry', result);
      // Still not committed means the run failed again: say so to scripts too.
      if (result.status !== 'committed') process.exitCode = 1;
    });
}

function addPolicyAndGrantCommands(program: Command, run: Run): void {
  const policy = program.command('policy').description('policy rules of the operations');
  policy
    .command('test')
    .argument('<operation>')
    .requiredOption('--params <json>', 'the params a proposal would carry, as JSON')
    .requiredOption('--agent <name>', 'the proposing agent')
    .option('--approver <identity>', "who would approve: tests the operation's approver rule")
    .option('--groups <list>', "the approver's groups, comma-separated (for the approver rule)", commaList, [])
    .description('print which rule would decide such a proposal, and why (writes nothing)')
    .action((operation: string, options: { params: string; agent: string; approver?: string; groups: string[] }) =>
      run('policy.test', { operation, params: options.params, agent: options.agent, approver: options.approver, groups: options.groups }),
    );

  const grants = program.command('grants').description('standing approvals given from chat, the console or the CLI');
  grants
    .command('list')
    .option('--all', 'include expired, used-up and revoked grants')
    .action((options: { all?: boolean }) => run('grants.list', { all: options.all === true }));
  grants
    .command('revoke')
    .argument('<id>')
    .option('--as <identity>', 'who revokes (recorded in the audit log; default operator:cli)')
    .description('revoke a grant at once')
    .action((id: string, options: { as?: string }) => run('grants.revoke', { id, as: options.as }));
}

/** The console's approvers and the outbox. */
function addOperatorCommands(program: Command, env: () => Env, run: Run): void {
  const approvers = program.command('approvers').description('people who approve in the web console (web:NAME)');
  approvers
    .command('link')
    .argument('<name>', 'the approver web:NAME (the "web:" is optional)')
    .description('print a one-time sign-in link to the web console (works once, for 10 minutes)')
    .action((name: string) => run('approvers.link', { name, baseUrl: publicBaseUrl(env()) }));
  approvers
    .command('revoke-sessions')
    .argument('<name>', 'the approver web:NAME (the "web:" is optional)')
    .description('end every console session and unused sign-in link of web:NAME')
    .action((name: string) => run('approvers.revoke-sessions', { name }));

  const jobs = program.command('jobs').description('the outbox: chat posts and edits, callbacks');
  jobs
    .command('list')
    .addOption(new Option('--status <status>', 'queued, running, done or dead'))
    .action((options: { status?: string }) => run('jobs.list', { status: options.status }));
  jobs
    .command('retry')
    .argument('<id>')
    .description('queue a dead job again with a fresh set of attempts')
    .action((id: string) => run('jobs.retry', { id }));
}

function addAuditCommands(program: Command, env: () => Env): void {
  const audit = program
    .command('audit')
    .description('print the audit log')
    .option('--follow', 'keep printing new events')
    .option('--json', 'one JSON object per line')
    .action(async (options: { follow?: boolean; json?: boolean }) => {
      let afterSeq = 0;
      for (;;) {
        const events = (await runOperation(env(), 'audit.list', { afterSeq })) as Array<{ seq: number }>;
        printAdminResult('audit.list', events, options);
        afterSeq = events.at(-1)?.seq ?? afterSeq;
        if (events.length === 500) continue;
        if (!options.follow) return;
        await new Promise((done) => setTimeout(done, 1_000));
      }
    });
  audit
    .command('verify')
    .description('recompute the hash chain; exit 1 naming the first bad row (with --checkpoints, 3 when no public key is pinned)')
    .option('--checkpoints <path>', 'also prove the table matches every signed checkpoint in this file or directory')
    .option('--public-key <key>', 'a pinned checkpoint key (repeatable; default: TWOKEY_AUDIT_PUBLIC_KEY)', collect, [])
    .action(async (options: { checkpoints?: string; publicKey: string[] }) => {
      const current = env();
      const pinned = options.publicKey.length > 0 ? options.publicKey : (current.TWOKEY_AUDIT_PUBLIC_KEY ?? []);
      // Without a pinned key, the only key at hand is the one beside the data: whoever rewrote the
      // table may have replaced it too. Checked anyway, but said loudly and never exit 0.
      const unpinned = options.checkpoints !== undefined && pinned.length === 0;
      const publicKeys = unpinned ? [localAuditPublicKey(current)].filter((key) => key !== null) : pinned;
      if (unpinned) console.error(unpinnedKeyWarning(current));
      const checkpoints = options.checkpoints ? resolve(options.checkpoints) : undefined;
      const verdict = (await runOperation(current, 'audit.verify', { checkpoints, publicKeys })) as { ok: boolean };
      printAdminResult('audit.verify', verdict);
      if (!verdict.ok) process.exitCode = 1;
      else if (unpinned) {
        console.error('twokey: exit 3: consistent with the checkpoints, but only against the local key; pin one to make this a proof.');
        process.exitCode = UNPINNED_EXIT_CODE;
      }
    });

  audit
    .command('key')
    .description("print the public key that verifies this installation's audit checkpoints")
    .action(() => {
      const key = localAuditPublicKey(env(), { create: true });
      console.log(key);
    });
}

/** `audit verify --checkpoints` passed, but against the key beside the data rather than a pinned one. */
const UNPINNED_EXIT_CODE = 3;

function unpinnedKeyWarning(current: Env): string {
  const where = current.TWOKEY_AUDIT_KEY
    ? 'derived from TWOKEY_AUDIT_KEY'
    : `read from ${current.TWOKEY_AUDIT_KEY_FILE ?? defaultKeyFile(current.TWOKEY_DATA_DIR)}`;
  return [
    'twokey: WARNING: NO PINNED PUBLIC KEY.',
    `  The checkpoints are checked against the key ${where}, on this machine, beside the data.`,
    '  Whoever could rewrite the audit table may have replaced that key and re-signed every checkpoint: a pass proves nothing.',
    '  Pin the key you recorded when twokey was set up (`twokey audit key` printed it):',
    '    twokey audit verify --checkpoints DIR --public-key KEY    or set TWOKEY_AUDIT_PUBLIC_KEY',
  ].join('\n');
}

/** The public half of the checkpoint key configured here, without creating a key file unless asked. */
function localAuditPublicKey(current: Env, options: { create?: boolean } = {}): string | null {
  if (current.TWOKEY_AUDIT_KEY) return publicKeyText(createSigner(parseAuditKey(current.TWOKEY_AUDIT_KEY)).publicKey);
  const file = current.TWOKEY_AUDIT_KEY_FILE ?? defaultKeyFile(current.TWOKEY_DATA_DIR);
  if (!options.create && !existsSync(file)) return null;
  return publicKeyText(createSigner(loadOrCreateKeyFile(file)).publicKey);
}

export async function main(argv: string[]): Promise<void> {
  let cachedEnv: Env | undefined;
  const env = () => (cachedEnv ??= loadEnv());
  try {
    loadDotEnv();
    await buildProgram(env).parseAsync(argv);
  } catch (error) {
    const failure = explainFailure(error, cachedEnv);
    console.error(`twokey: ${failure.message}`);
    if (failure.unexpected && (cachedEnv?.LOG_LEVEL === 'debug' || cachedEnv?.LOG_LEVEL === 'trace')) console.error(error);
    process.exit(failure.exitCode);
  }
}
