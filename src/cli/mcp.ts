import { checkTwokey, serveStdioProxy } from '../mcp/stdio-proxy.js';

/**
 * `twokey mcp`: the agent's gated tools over stdio, forwarded to a running twokey. Loads the stdio
 * proxy (the MCP SDK) and nothing of the server. stdout carries the protocol: every word for
 * people goes to stderr.
 */
export async function serveMcp(): Promise<void> {
  const apiKey = process.env.TWOKEY_AGENT_KEY;
  if (!apiKey) {
    console.error("twokey mcp: set TWOKEY_AGENT_KEY to the agent's API key (tk_agent_…)");
    process.exit(2);
  }
  const options = { url: process.env.TWOKEY_URL || 'http://127.0.0.1:8080', apiKey };
  const proxy = await serveStdioProxy(options);
  // Checked beside serving rather than before it, and once the client has spoken (loading the SDK's
  // client would hold up the answer to `initialize`); a wrong URL or key still ends the process with
  // one line in the client's log and exit 1.
  const checked = proxy.started
    .then(() => checkTwokey(options))
    .catch((error: unknown) => {
      console.error(`twokey mcp: cannot use ${options.url}/mcp: ${error instanceof Error ? error.message : String(error)}`);
      process.exit(1);
    });
  // Even a client that hangs up at once learns whether the server could be used.
  const stop = () => void checked.then(() => proxy.close()).then(() => process.exit(0));
  process.stdin.once('end', stop);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
