import { Command, Option } from 'commander';
import type * as z from 'zod';
import type { AdminCommandName, AdminCommands } from '../admin/commands.js';
import type { Env } from '../config/env.js';

/**
 * Every `twokey` command, its arguments and options: commander and nothing else at load. Each
 * action imports its group when it runs (serve: the server; mcp: the stdio proxy; the operator
 * commands: the command table and the admin socket client, the database only without a server).
 */

export interface Context {
  version: string;
  env(): Promise<Env>;
}

type Input<Name extends AdminCommandName> = z.input<AdminCommands[Name]['input']>;

/** Runs one operator command where the data lives and prints its answer with the command's own `print`. */
async function run<Name extends AdminCommandName>(context: Context, name: Name, input: Input<Name>): Promise<void> {
  const { runAndPrint } = await import('./admin.js');
  await runAndPrint(await context.env(), name, input);
}

const collect = (value: string, previous: string[]) => [...previous, value];
const commaList = (value: string) =>
  value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);

const AS_APPROVER = 'the approver identity you act as (slack:U…, discord:user:…, web:NAME)';

export function buildProgram(context: Context): Command {
  const program = new Command('twokey')
    .description('Two-key approval bridge for AI agents')
    .version(context.version, '-V, --version', 'print the version')
    .showHelpAfterError();
  addProcessCommands(program, context);
  addAgentAndProposalCommands(program, context);
  addPolicyAndGrantCommands(program, context);
  addOperatorCommands(program, context);
  addAuditCommands(program, context);
  return program;
}

/** Commands that run a process: the gateway, the MCP stdio proxy, the migrations. */
function addProcessCommands(program: Command, context: Context): void {
  program
    .command('serve')
    .description('start the gateway (what `npm start` runs)')
    .action(async () => {
      const { serve } = await import('./serve.js');
      await serve(await context.env(), context.version);
    });

  program
    .command('mcp')
    .description("serve the agent's gated tools over stdio (MCP), forwarding to a running twokey: TWOKEY_URL, TWOKEY_AGENT_KEY")
    .action(async () => {
      const { serveMcp } = await import('./mcp.js');
      await serveMcp();
    });

  program
    .command('migrate')
    .description('apply database migrations and exit')
    .action(async () => {
      const current = await context.env();
      const { openDatabase } = await import('../db/database.js');
      const database = await openDatabase({ databaseUrl: current.DATABASE_URL, dataDir: current.TWOKEY_DATA_DIR, poolSize: 1 });
      await database.close();
      console.log(`migrations applied (${database.kind})`);
    });
}

function addAgentAndProposalCommands(program: Command, context: Context): void {
  const agents = program.command('agents').description('manage agents and their API keys');
  agents
    .command('create')
    .argument('<name>')
    .option('--owner <identity>', 'a human behind the agent (repeatable); owners can never approve its proposals', collect, [])
    .option('--operations <names>', 'comma-separated operations the agent may propose (default: all)', commaList)
    .description('create an agent; prints its callback secret, then its API key as the last line')
    .action((name: string, options: { owner: string[]; operations?: string[] }) =>
      run(context, 'agents.create', { name, owners: options.owner, operations: options.operations }),
    );
  agents
    .command('list')
    .description('list agents')
    .action(() => run(context, 'agents.list', {}));
  agents
    .command('revoke')
    .argument('<name>')
    .description("revoke an agent's API key")
    .action((name: string) => run(context, 'agents.revoke', { name }));

  const proposals = program.command('proposals').description('list and decide proposals');
  proposals
    .command('list')
    .addOption(new Option('--status <status>', 'only proposals in this status'))
    // Checked by the command's schema, which names the statuses.
    .action((options: { status?: string }) => run(context, 'proposals.list', { status: options.status as Input<'proposals.list'>['status'] }));
  proposals
    .command('approve')
    .argument('<id>')
    .requiredOption('--as <identity>', AS_APPROVER)
    .option('--grant <duration>', 'and approve the same operation for this agent for this long (15m, 1h…)')
    .option('--uses <n>', 'with --grant: at most this many proposals')
    .option('--bounded', "with --grant: only params up to (numbers) or equal to (the rest) this proposal's")
    .description('approve a proposal as an approver (same rules as a chat click)')
    .action((id: string, options: { as: string; grant?: string; uses?: string; bounded?: boolean }) =>
      run(context, 'proposals.approve', { id, as: options.as, grant: options.grant, uses: options.uses, bounded: options.bounded === true }),
    );
  proposals
    .command('reject')
    .argument('<id>')
    .requiredOption('--as <identity>', AS_APPROVER)
    .option('--reason <reason>', 'why (shown to the agent and in chat)')
    .description('reject a proposal as an approver (same rules as a chat click)')
    .action((id: string, options: { as: string; reason?: string }) => run(context, 'proposals.reject', { id, as: options.as, reason: options.reason }));
  proposals
    .command('retry')
    .argument('<id>')
    .requiredOption('--as <identity>', AS_APPROVER)
    .description('run an approved proposal again after its execution failed (same rules and idempotency key as the chat Retry button)')
    .action((id: string, options: { as: string }) => run(context, 'proposals.retry', { id, as: options.as }));
}

function addPolicyAndGrantCommands(program: Command, context: Context): void {
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
      run(context, 'policy.test', {
        operation,
        params: options.params,
        agent: options.agent,
        ...(options.approver ? { approver: options.approver } : {}),
        groups: options.groups,
      }),
    );

  const grants = program.command('grants').description('standing approvals given from chat, the console or the CLI');
  grants
    .command('list')
    .option('--all', 'include expired, used-up and revoked grants')
    .action((options: { all?: boolean }) => run(context, 'grants.list', { all: options.all === true }));
  grants
    .command('revoke')
    .argument('<id>')
    .option('--as <identity>', 'who revokes (recorded in the audit log; default operator:cli)')
    .description('revoke a grant at once')
    .action((id: string, options: { as?: string }) => run(context, 'grants.revoke', { id, as: options.as }));
}

/** The console's approvers and the outbox. */
function addOperatorCommands(program: Command, context: Context): void {
  const approvers = program.command('approvers').description('people who approve in the web console (web:NAME)');
  approvers
    .command('link')
    .argument('<name>', 'the approver web:NAME (the "web:" is optional)')
    .description('print a one-time sign-in link to the web console (works once, for 10 minutes)')
    .action(async (name: string) => {
      const { publicBaseUrl } = await import('../console/urls.js');
      await run(context, 'approvers.link', { name, baseUrl: publicBaseUrl(await context.env()) });
    });
  approvers
    .command('revoke-sessions')
    .argument('<name>', 'the approver web:NAME (the "web:" is optional), or oidc:VALUE for a person the issuer signed in')
    .description('end every console session (and unused sign-in link) of web:NAME or oidc:VALUE')
    .action((name: string) => run(context, 'approvers.revoke-sessions', { name }));

  const jobs = program.command('jobs').description('the outbox: chat posts and edits, callbacks');
  jobs
    .command('list')
    .addOption(new Option('--status <status>', 'queued, running, done or dead'))
    .action((options: { status?: string }) => run(context, 'jobs.list', { status: options.status as Input<'jobs.list'>['status'] }));
  jobs
    .command('retry')
    .argument('<id>')
    .description('queue a dead job again with a fresh set of attempts')
    .action((id: string) => run(context, 'jobs.retry', { id }));
}

function addAuditCommands(program: Command, context: Context): void {
  const audit = program
    .command('audit')
    .description('print the audit log')
    .option('--follow', 'keep printing new events')
    .option('--json', 'one JSON object per line')
    .action(async (options: { follow?: boolean; json?: boolean }) => {
      const { printAuditLog } = await import('./audit.js');
      await printAuditLog(await context.env(), options);
    });
  audit
    .command('verify')
    .description('recompute the hash chain; exit 1 naming the first bad row (with --checkpoints, 3 when no public key is pinned)')
    .option('--checkpoints <path>', 'also prove the table matches every signed checkpoint in this file or directory')
    .option('--public-key <key>', 'a pinned checkpoint key (repeatable; default: TWOKEY_AUDIT_PUBLIC_KEY)', collect, [])
    .action(async (options: { checkpoints?: string; publicKey: string[] }) => {
      const { verifyAudit } = await import('./audit.js');
      await verifyAudit(await context.env(), options);
    });
  audit
    .command('key')
    .description("print the public key that verifies this installation's audit checkpoints")
    .action(async () => {
      const { localAuditPublicKey } = await import('./audit.js');
      console.log(localAuditPublicKey(await context.env(), { create: true }));
    });
}
