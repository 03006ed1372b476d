import { execFile } from 'node:child_process';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { mcpConfigYaml } from './config.js';
import { listen } from './support.js';

const run = promisify(execFile);
const conformanceBin = fileURLToPath(new URL('../../node_modules/@modelcontextprotocol/conformance/dist/index.js', import.meta.url));
const inspectorBin = fileURLToPath(new URL('../../node_modules/@modelcontextprotocol/inspector-cli/build/index.js', import.meta.url));

/**
 * The suite's client sends no Authorization header and has no option for one: this loopback proxy
 * adds the agent key, so /mcp itself stays closed to anonymous callers.
 */
async function startKeyProxy(target: string, apiKey: string): Promise<{ url: string; close(): Promise<void> }> {
  const upstream = new URL(target);
  const server: Server = createServer((req, res) => {
    const forwarded = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        path: upstream.pathname,
        method: req.method,
        headers: { ...req.headers, host: upstream.host, authorization: `Bearer ${apiKey}` },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Runs one server scenario of @modelcontextprotocol/conformance; true when every check passed. */
async function scenario(name: string, url: string): Promise<{ passed: boolean; output: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [conformanceBin, 'server', '--url', url, '--scenario', name], { timeout: 90_000 });
    return { passed: true, output: stdout + stderr };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string };
    return { passed: false, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

describe('MCP conformance (@modelcontextprotocol/conformance 0.1.9) and the inspector CLI, offline', () => {
  let twokey: TestTwokey;
  let mcpUrl: string;
  let apiKey: string;
  let proxy: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver: 'pglite', configYaml: mcpConfigYaml });
    mcpUrl = await listen(twokey);
    ({ apiKey } = await twokey.createAgent('conformance'));
    proxy = await startKeyProxy(mcpUrl, apiKey);
  }, 120_000);
  afterAll(async () => {
    await proxy?.close();
    await twokey?.close();
  });

  // The scenarios that need no fixture tools of the suite's own test server. The others call tools,
  // prompts, resources, logging or completions twokey does not offer (a gated tool is never a fixture).
  it.each(['server-initialize', 'ping', 'tools-list'])(
    'passes %s',
    async (name) => {
      const { passed, output } = await scenario(name, proxy.url);
      expect(output).not.toMatch(/FAILURE|✗/);
      expect(passed, output).toBe(true);
    },
    120_000,
  );

  it('lists the gated tools through @modelcontextprotocol/inspector-cli', async () => {
    const { stdout } = await run(
      process.execPath,
      [inspectorBin, mcpUrl, '--transport', 'http', '--method', 'tools/list', '--header', `Authorization: Bearer ${apiKey}`],
      // 1.0.3 tests for its own package.json relative to the working directory but imports it relative
      // to itself: from its build folder the two agree.
      { timeout: 90_000, cwd: dirname(inspectorBin) },
    );
    const listed = JSON.parse(stdout) as { tools: Array<{ name: string }> };
    expect(listed.tools.map((tool) => tool.name).sort()).toEqual(['delete_workspace', 'upgrade_plan']);
  }, 120_000);
});
