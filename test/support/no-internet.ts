import net from 'node:net';

/**
 * No test may reach beyond this machine: any TCP connection to a host other than loopback throws,
 * so a forgotten base URL fails loudly instead of calling a real Slack or Discord.
 */
const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost|::ffff:127\.\d+\.\d+\.\d+)$/;

// Test files share a worker's modules (vitest.config.ts: isolate: false) but each runs this file:
// the guard is put in once, not wrapped around itself for every file.
const guarded = Symbol.for('twokey.test.noInternet');
const prototype = net.Socket.prototype as net.Socket & { [guarded]?: true };
if (!prototype[guarded]) guardConnect();

function guardConnect() {
  prototype[guarded] = true;
  const originalConnect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function guardedConnect(this: net.Socket, ...args: unknown[]) {
    const [first, second] = args as [unknown, unknown];
    const options = (typeof first === 'object' && first !== null ? first : {}) as { host?: string; path?: string };
    const host = typeof first === 'object' ? options.host : typeof second === 'string' ? second : undefined;
    const isUnixSocket = typeof first === 'string' || (typeof first === 'object' && options.path !== undefined);
    if (!isUnixSocket && host !== undefined && !LOOPBACK.test(host)) {
      throw new Error(`test tried to connect to ${host}: tests must not reach the internet`);
    }
    return (originalConnect as (...a: unknown[]) => net.Socket).apply(this, args);
  } as typeof net.Socket.prototype.connect;
}
