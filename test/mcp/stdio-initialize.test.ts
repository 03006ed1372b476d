/**
 * `twokey mcp` answers `initialize` itself, before the MCP SDK has loaded: its answer must be the one
 * the SDK's server gives, for every protocol version a client may ask for.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { SUPPORTED_PROTOCOL_VERSIONS, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { initializeResult, STDIO_PROTOCOL_VERSIONS } from '../../src/mcp/stdio-proxy.js';

async function sdkAnswer(protocolVersion: string): Promise<unknown> {
  const result = initializeResult(protocolVersion);
  const server = new Server(result.serverInfo, { capabilities: result.capabilities });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const answer = new Promise<JSONRPCMessage>((done) => (clientSide.onmessage = done));
  await clientSide.start();
  await clientSide.send({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion, capabilities: {}, clientInfo: { name: 'test', version: '0' } },
  });
  const message = await answer;
  await server.close();
  return 'result' in message ? message.result : message;
}

describe('the stdio proxy’s own answer to initialize', () => {
  it('knows the protocol versions the SDK supports', () => {
    expect(STDIO_PROTOCOL_VERSIONS).toEqual(SUPPORTED_PROTOCOL_VERSIONS);
  });

  it.each([...SUPPORTED_PROTOCOL_VERSIONS, '1999-01-01'])('is the SDK server’s answer when the client asks for %s', async (version) => {
    expect(initializeResult(version)).toEqual(await sdkAnswer(version));
  });

  it('is what an SDK client accepts', async () => {
    const result = initializeResult('2025-06-18');
    const server = new Server(result.serverInfo, { capabilities: result.capabilities });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: 'test', version: '0' });
    await client.connect(clientSide);
    expect(client.getServerVersion()).toEqual(result.serverInfo);
    expect(client.getServerCapabilities()).toEqual(result.capabilities);
    await client.close();
  });
});
