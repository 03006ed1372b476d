/**
 * The client package as an agent's developer gets it: `npm pack` of packages/client (in a copy of the
 * tree, so the live packages/client/dist/ is never emptied), installed ALONE into an empty project with
 * `npm install --offline`, then measured (what npm installed, and its bytes on disk) and used against
 * a running twokey: the SDK with no framework at all, then each adapter with its framework.
 *
 * The frameworks are the application's, not the client's (optional peers): here they are the repo's
 * own devDependencies, linked into the consumer's node_modules after the measurement, as an
 * application that already depends on `ai`, `@openai/agents` or `@langchain/langgraph` would have them.
 * A link (not NODE_PATH, which ES module resolution ignores) resolves like an install: the client's
 * `import 'ai'` finds node_modules/ai from the consumer's folder, and the framework's own dependencies
 * resolve from where it really lives.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdapterHarness, type AdapterHarness } from '../adapters/support.js';
import { bytesUnder, copyOfTree, npm, pack, root, run, succeed, type Packed } from './support.js';

/** The target for installing the client alone. */
const MAX_PACKAGES = 3;
const MAX_BYTES = 1_000_000;
const FRAMEWORKS = ['ai', '@openai/agents', '@langchain/langgraph'];

/** A consumer script: the client from the installed package, the server's address and key from the environment. */
const connect = [
  "import { Twokey } from '@twokey/client';",
  'const client = new Twokey({ baseUrl: process.env.TWOKEY_URL, apiKey: process.env.TWOKEY_AGENT_KEY });',
];

const scripts: Record<string, string[]> = {
  'sdk.mjs': [...connect, 'console.log(JSON.stringify((await client.operations()).map((operation) => operation.name)));'],
  // The AI SDK's own mock model calls the gated tool once, then answers.
  'ai-sdk.mjs': [
    ...connect,
    "import { generateText, stepCountIs } from 'ai';",
    "import { MockLanguageModelV3 } from 'ai/test';",
    "import { twokeyTool } from '@twokey/client/ai-sdk';",
    'const usage = { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } };',
    'let step = 0;',
    'const model = new MockLanguageModelV3({ doGenerate: async () => (++step === 1',
    "  ? { content: [{ type: 'tool-call', toolCallId: 'call_1', toolName: 'refund', input: JSON.stringify({ order: 'ord_ai', amount_cents: 100 }) }], finishReason: { unified: 'tool-calls' }, usage, warnings: [] }",
    "  : { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop' }, usage, warnings: [] }) });",
    "const result = await generateText({ model, tools: { refund: twokeyTool({ client, operation: 'refund' }) }, prompt: 'Refund ord_ai', stopWhen: stepCountIs(3) });",
    'const output = result.steps[0].toolResults[0].output;',
    'console.log(JSON.stringify({ outcome: output.outcome, text: output.text }));',
  ],
  // An Agents SDK run whose model calls the gated tool once, then answers with the words it read.
  'openai-agents.mjs': [
    ...connect,
    "import { Agent, Usage, run, setTracingDisabled } from '@openai/agents';",
    "import { twokeyTool } from '@twokey/client/openai-agents';",
    'setTracingDisabled(true);',
    'let calls = 0;',
    'const model = {',
    '  async getResponse(request) {',
    "    if (++calls === 1) return { usage: new Usage(), output: [{ type: 'function_call', callId: 'call_1', name: 'refund', arguments: JSON.stringify({ order: 'ord_oa', amount_cents: 200 }), status: 'completed' }] };",
    "    const read = request.input.find((item) => item.type === 'function_call_result').output;",
    "    const text = typeof read === 'string' ? read : read.text;",
    "    return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] }] };",
    '  },',
    "  async *getStreamedResponse() { throw new Error('not streamed'); },",
    '};',
    "const agent = new Agent({ name: 'shopbot', instructions: 'Refund when asked.', model, tools: [twokeyTool({ client, operation: 'refund' })] });",
    "const result = await run(agent, 'Refund ord_oa');",
    'console.log(JSON.stringify({ text: result.finalOutput }));',
  ],
  // A LangGraph node gated by twokey: it pauses on interrupt() and resumes once the human decided.
  'langgraph.mjs': [
    ...connect,
    "import { Annotation, END, MemorySaver, START, StateGraph } from '@langchain/langgraph';",
    "import { resumeWhenDecided, twokeyGate } from '@twokey/client/langgraph';",
    'const State = Annotation.Root({ report: Annotation(), outcome: Annotation() });',
    'const graph = new StateGraph(State)',
    "  .addNode('refund', async () => { const gated = await twokeyGate(client, { operation: 'refund', params: { order: 'ord_lg', amount_cents: 300 } }); return { report: gated.text, outcome: gated.outcome }; })",
    "  .addEdge(START, 'refund').addEdge('refund', END).compile({ checkpointer: new MemorySaver() });",
    "const config = { configurable: { thread_id: 'thread-1' } };",
    'const paused = await graph.invoke({}, config);',
    // The test approves only once the thread is paused, so resumeWhenDecided is what carries the decision.
    'console.log(JSON.stringify({ paused: paused.__interrupt__?.[0]?.value?.twokey?.operation ?? null }));',
    'const resumed = await resumeWhenDecided(client, graph, config, { waitMs: 60_000 });',
    'console.log(JSON.stringify({ outcome: resumed.output.outcome, text: resumed.output.report }));',
  ],
};

// Every step is a new process on a busy two-core machine (npm, node, PGlite): generous timeouts.
describe('the client package installed alone', { timeout: 300_000 }, () => {
  let workDir: string;
  let app: string;
  let packed: Packed;
  let harness: AdapterHarness;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'twokey-client-pack-'));
    app = join(workDir, 'app');
    await mkdir(app);
    const tree = await copyOfTree(workDir);
    packed = await pack(join(tree, 'packages/client'), app);
    await writeFile(
      join(app, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module', dependencies: { '@twokey/client': `file:${packed.filename}` } }),
    );
    await succeed(npm, ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app });
    for (const [name, lines] of Object.entries(scripts)) await writeFile(join(app, name), lines.join('\n'));
    harness = await startAdapterHarness('pglite');
    env = { ...process.env, TWOKEY_URL: harness.baseUrl, TWOKEY_AGENT_KEY: harness.apiKey };
  }, 600_000);

  afterAll(async () => {
    await harness?.close();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it(`installs at most ${MAX_PACKAGES} packages in at most ${MAX_BYTES} bytes, none of the server's`, async () => {
    const installed = JSON.parse(await readFile(join(app, 'node_modules/.package-lock.json'), 'utf8')).packages as Record<string, unknown>;
    const packages = Object.keys(installed);
    const bytes = await bytesUnder(join(app, 'node_modules'));
    console.log(
      `@twokey/client installed alone: ${packages.length} package(s) (${packages.join(', ')}), ${bytes} bytes in node_modules; tarball ${packed.size} bytes, ${packed.entryCount} files`,
    );
    expect(packages).toEqual(['node_modules/@twokey/client']);
    expect(packages.length).toBeLessThanOrEqual(MAX_PACKAGES);
    expect(bytes).toBeLessThanOrEqual(MAX_BYTES);
  });

  it('ships the built SDK and adapters with their types, and no tests', () => {
    const paths = packed.files.map((file) => file.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'dist/sdk/index.js',
        'dist/sdk/index.d.ts',
        'dist/adapters/ai-sdk.js',
        'dist/adapters/langgraph.d.ts',
      ]),
    );
    expect(paths.filter((path) => !/^(dist|src)\//.test(path))).toEqual(['README.md', 'package.json']);
  });

  it('the SDK works with no framework installed; an adapter without its framework fails at import, naming it', async () => {
    expect(JSON.parse(await succeed(process.execPath, ['sdk.mjs'], { cwd: app, env }))).toContain('refund');
    const withoutFramework = await run(process.execPath, ['--input-type=module', '-e', "await import('@twokey/client/ai-sdk')"], { cwd: app, env });
    expect(withoutFramework.code).not.toBe(0);
    expect(withoutFramework.stderr).toMatch(/Cannot find package 'ai'/);
  });

  describe('each adapter, with the framework the application brings', () => {
    beforeAll(async () => {
      for (const name of FRAMEWORKS) {
        await mkdir(dirname(join(app, 'node_modules', name)), { recursive: true });
        await symlink(join(root, 'node_modules', name), join(app, 'node_modules', name), 'dir');
      }
    });

    /** Runs a consumer script, approves the refund it proposes in the console, and returns what it printed. */
    async function approvedRun(
      script: string,
      order: string,
      approveOnceItPrints?: string,
    ): Promise<{ outcome?: { outcome: string; userConsent: boolean }; text: string }> {
      const before = harness.executions.length;
      const child = spawn(process.execPath, [script], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const closed = once(child, 'close') as Promise<[number | null]>;
      // Loading a framework takes a while on a busy machine: wait for the proposal as long as the script runs.
      let proposalId: string | undefined;
      while (!proposalId) {
        if (child.exitCode !== null) throw new Error(`${script} exited ${child.exitCode} before proposing: ${stderr}`);
        const pending = await harness.twokey.services.store.listProposals({ status: 'pending', operation: 'refund' });
        proposalId = pending.find((proposal) => proposal.params['order'] === order)?.id;
        if (!proposalId) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      while (approveOnceItPrints && !stdout.includes(approveOnceItPrints)) {
        if (child.exitCode !== null) throw new Error(`${script} exited ${child.exitCode} before printing ${approveOnceItPrints}: ${stdout} ${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await harness.approve(proposalId);
      const [code] = await closed;
      if (code !== 0) throw new Error(`${script} exited ${code}: ${stderr}`);
      expect(harness.executions.length - before).toBe(1);
      return JSON.parse(stdout.trim().split('\n').at(-1) ?? 'null');
    }

    it.each([
      ['ai-sdk.mjs', 'ord_ai', undefined],
      ['openai-agents.mjs', 'ord_oa', undefined],
      ['langgraph.mjs', 'ord_lg', '{"paused":"refund"}'],
    ])('%s: the gated refund is approved in the console, runs once, and the run reads the outcome', async (script, order, approveOnceItPrints) => {
      const answer = await approvedRun(script, order, approveOnceItPrints);
      // The Agents SDK adapter gives the model the words only; the other two also the outcome object.
      if (script !== 'openai-agents.mjs') expect(answer.outcome).toMatchObject({ outcome: 'committed', userConsent: true });
      expect(answer.text).toContain('Approved by web:operator and done');
    });
  });
});
