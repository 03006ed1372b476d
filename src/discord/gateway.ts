import { Client, Events, GatewayDispatchEvents } from 'discord.js';
import type { FastifyBaseLogger } from 'fastify';
import type { LeaderElector } from './ports.js';

/**
 * The advisory lock that elects the one replica holding the Discord gateway connection. Any constant
 * works as long as every twokey process on the database uses the same one ("twkd").
 */
export const GATEWAY_LOCK_KEY = 0x74776b64;

export interface GatewayOptions {
  apiUrl: string;
  botToken: string;
  /** The fleet's leader election (one replica connects). */
  elect: LeaderElector;
  /** How often a standby replica tries to take the lock, and the leader checks it still holds it. */
  retryMs: number;
  logger: () => FastifyBaseLogger;
  onInteraction(payload: unknown): void;
}

export interface DiscordGateway {
  start(): void;
  stop(): Promise<void>;
  /** True while this process holds a logged-in gateway connection. */
  isConnected(): boolean;
}

/**
 * Receives interactions over the Discord gateway (discord.js `Client`), for installs without a public
 * URL. Discord delivers every interaction to every connected session, so only one replica connects:
 * the one the fleet's leader election picks (an advisory lock on PostgreSQL; always this process on
 * the embedded database). When the leader dies, a standby takes over within `retryMs`.
 */
export function createDiscordGateway(options: GatewayOptions): DiscordGateway {
  const { logger } = options;
  let client: Client | null = null;

  async function connect(): Promise<void> {
    const next = new Client({ intents: [], rest: { api: options.apiUrl } });
    // Raw payloads, so the gateway and the HTTP endpoint share one interaction handler.
    next.ws.on(GatewayDispatchEvents.InteractionCreate, (data: unknown) => options.onInteraction(data));
    next.on(Events.Error, (error) => logger().warn({ err: error }, 'Discord gateway error'));
    next.on(Events.ShardDisconnect, (event) => logger().warn({ code: event.code }, 'Discord gateway disconnected'));
    try {
      await next.login(options.botToken);
    } catch (error) {
      await next.destroy().catch(() => undefined);
      throw error;
    }
    client = next;
    logger().info('Discord gateway connected');
  }

  async function disconnect(): Promise<void> {
    const current = client;
    client = null;
    if (current) await current.destroy().catch((error: unknown) => logger().warn({ err: error }, 'Discord gateway did not close cleanly'));
  }

  const election = options.elect({
    key: GATEWAY_LOCK_KEY,
    name: 'discord-gateway',
    log: logger,
    retryMs: options.retryMs,
    onElected: connect,
    onDeposed: disconnect,
  });

  return {
    start: () => election.start(),
    stop: () => election.stop(),
    isConnected: () => client !== null,
  };
}
