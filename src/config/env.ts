import ipaddr from 'ipaddr.js';
import * as z from 'zod';
import { createSigner, parseAuditKey } from './audit-key.js';
import { parseAllowList } from '../lib/address-guard.js';
import { ConfigError } from './errors.js';
import { urlString } from '../lib/url-string.js';
import { chatPlatforms, type ChatPlatformsEnv } from '../platforms/index.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const AGENR_EXECUTE_POLICIES = ['open', 'confirm', 'strict'] as const;
export type AgenrExecutePolicy = (typeof AGENR_EXECUTE_POLICIES)[number];

/**
 * The validated environment. Keys are the variable names so a reader can grep for them; each chat
 * platform's (`SLACK_…`, `DISCORD_…`) are declared in its `platform.ts`.
 */
export type Env = ServerEnv & ChatPlatformsEnv;

/** The variables of the server itself. */
export interface ServerEnv {
  readonly PORT: number;
  readonly HOST: string;
  /** unset → embedded PGlite in TWOKEY_DATA_DIR */
  readonly DATABASE_URL?: string;
  readonly TWOKEY_DATA_DIR: string;
  readonly TWOKEY_CONFIG?: string;
  readonly TWOKEY_PUBLIC_URL?: string;
  /** CIDRs, IPs and hostnames callbacks may reach besides public addresses (comma-separated). */
  readonly TWOKEY_CALLBACK_ALLOW?: string;
  readonly AGENR_EXECUTE_POLICY: AgenrExecutePolicy;
  /** cents */
  readonly AGENR_MAX_EXECUTE_AMOUNT: number;
  readonly LOG_LEVEL: LogLevel;
  /** Open long-polls (`?wait=`) per agent; more answer 429. */
  readonly TWOKEY_MAX_LONG_POLLS_PER_AGENT: number;
  /** Proposals waiting for a decision per agent; more answer 429. */
  readonly TWOKEY_MAX_PENDING_PER_AGENT: number;
  /** Refused authentications per client address, and per failing key prefix, per minute; past it those refusals answer 429. */
  readonly TWOKEY_MAX_FAILED_AUTH_PER_MINUTE: number;
  /**
   * Whose `X-Forwarded-For` names the client (fastify's `trustProxy`): false (the default: the peer
   * address is the client), true (any peer: only when nothing reaches twokey but the proxy), or the
   * proxies' addresses and CIDRs.
   */
  readonly TWOKEY_TRUST_PROXY: boolean | string[];
  /** seconds a decision callback waits for the agent's receiver to answer */
  readonly TWOKEY_CALLBACK_TIMEOUT: number;
  /** callbacks of one agent delivered at once per replica (half of it at most to any one host) */
  readonly TWOKEY_CALLBACK_CONCURRENCY_PER_AGENT: number;
  /** Responses larger than this are not kept for Idempotency-Key replay (the key answers 409 on reuse). */
  readonly TWOKEY_IDEMPOTENCY_MAX_RESPONSE_BYTES: number;
  /** Ed25519 key that signs audit checkpoints: base64 of the 32-byte seed, or a PKCS#8 PEM. */
  readonly TWOKEY_AUDIT_KEY?: string;
  /** Where the key is kept (created 0600) when TWOKEY_AUDIT_KEY is unset; beside the data dir by default. */
  readonly TWOKEY_AUDIT_KEY_FILE?: string;
  /** Directory that receives every signed checkpoint (checkpoints.jsonl); beside the data dir by default. */
  readonly TWOKEY_AUDIT_CHECKPOINTS?: string;
  /** URL that receives every signed checkpoint as a POST, and the integrator's alerts. */
  readonly TWOKEY_AUDIT_WEBHOOK_URL?: string;
  /** Pinned public key(s) of the checkpoint signer (base64, comma-separated): what `audit verify --checkpoints` and the console trust. */
  readonly TWOKEY_AUDIT_PUBLIC_KEY?: string[];
  /** seconds an MCP tools/call waits for the decision before answering `pending` */
  readonly TWOKEY_MCP_WAIT: number;
  /** Below this many MiB free on the embedded database's disk, writes are refused (507) and /readyz is 503; 0 disables. */
  readonly TWOKEY_MIN_FREE_DISK_MB: number;
  /** Seconds the event loop may stay blocked before `twokey serve` logs it and exits; 0 disables. */
  readonly TWOKEY_WATCHDOG_SECONDS: number;
}

function integerString(min: number, max: number, error: string) {
  return z
    .string()
    .regex(/^\d+$/, { error })
    .transform(Number)
    .refine((n) => n >= min && n <= max, { error });
}

/** Names proxy-addr (fastify's trustProxy) accepts besides addresses and CIDRs. */
const PROXY_RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

/** An IP address in its usual form (not `1` for 0.0.0.1), or a CIDR of one. */
function isProxyAddress(text: string): boolean {
  const [address = '', prefix] = text.split('/');
  const usual = ipaddr.IPv4.isValidFourPartDecimal(address) || ipaddr.IPv6.isValid(address);
  return usual && (prefix === undefined || ipaddr.isValidCIDR(text));
}

/**
 * `TWOKEY_TRUST_PROXY`: true/false, or a comma list of proxy addresses, CIDRs and range names. No
 * hop count: fastify 5 treats one as trusting nobody, since it cannot tell a proxy from a client.
 */
const trustProxySchema = z.string().transform((text, context): boolean | string[] => {
  if (text === 'true' || text === 'false') return text === 'true';
  const items = text.split(',').map((item) => item.trim());
  if (items.every((item) => PROXY_RANGE_NAMES.includes(item) || isProxyAddress(item))) return items;
  context.addIssue({
    code: 'custom',
    message: 'expected true, false, or a comma-separated list of proxy IP addresses, CIDRs, loopback, linklocal or uniquelocal',
  });
  return z.NEVER;
});

/** `TWOKEY_AUDIT_PUBLIC_KEY`: one or more raw Ed25519 public keys, base64 (what `twokey audit key` prints). */
const auditPublicKeysSchema = z.string().transform((text, context) => {
  const keys = text.split(',').map((key) => key.trim());
  if (keys.every((key) => /^[A-Za-z0-9+/]{43}=$/.test(key) && Buffer.from(key, 'base64').length === 32)) return keys;
  context.addIssue({
    code: 'custom',
    message: 'expected one or more base64 Ed25519 public keys (44 characters each, as `twokey audit key` prints), comma-separated',
  });
  return z.NEVER;
});

/*
 * Every schema carries its own message so that no zod default message (which may quote
 * the input) can reach the output: several of these variables are secrets.
 */
const envSchema = z.object({
  PORT: integerString(1, 65_535, 'expected an integer between 1 and 65535').default(8080),
  HOST: z.string().default('127.0.0.1'),
  DATABASE_URL: urlString(['postgres:', 'postgresql:'], 'expected a postgres:// or postgresql:// URL').optional(),
  TWOKEY_DATA_DIR: z.string().default('./data'),
  TWOKEY_CONFIG: z.string().optional(),
  TWOKEY_PUBLIC_URL: urlString(['http:', 'https:'], 'expected an http:// or https:// URL').optional(),
  TWOKEY_CALLBACK_ALLOW: z
    .string()
    .refine(
      (text) => {
        try {
          parseAllowList(text);
          return true;
        } catch {
          return false;
        }
      },
      { error: 'expected a comma-separated list of CIDRs (10.0.0.0/8), IP addresses or hostnames' },
    )
    .optional(),
  // Each chat platform's variables, where .env.example lists them (its own messages: they may be secrets).
  ...Object.assign({}, ...chatPlatforms.map((platform) => platform.env.schema.shape)),
  AGENR_EXECUTE_POLICY: z.enum(AGENR_EXECUTE_POLICIES, { error: 'expected one of: open, confirm, strict' }).default('open'),
  AGENR_MAX_EXECUTE_AMOUNT: integerString(0, Number.MAX_SAFE_INTEGER, 'expected a non-negative integer (cents)').default(100),
  TWOKEY_MCP_WAIT: integerString(0, 300, 'expected whole seconds between 0 and 300').default(50),
  TWOKEY_MIN_FREE_DISK_MB: integerString(0, 1_048_576, 'expected whole MiB between 0 and 1048576 (0 disables the check)').default(128),
  TWOKEY_WATCHDOG_SECONDS: integerString(0, 3_600, 'expected whole seconds between 0 and 3600 (0 disables the watchdog)').default(30),
  TWOKEY_MAX_LONG_POLLS_PER_AGENT: integerString(1, 10_000, 'expected an integer between 1 and 10000').default(20),
  TWOKEY_MAX_PENDING_PER_AGENT: integerString(1, 1_000_000, 'expected an integer between 1 and 1000000').default(100),
  TWOKEY_MAX_FAILED_AUTH_PER_MINUTE: integerString(1, 1_000_000, 'expected an integer between 1 and 1000000').default(20),
  TWOKEY_TRUST_PROXY: trustProxySchema.default(false),
  TWOKEY_CALLBACK_TIMEOUT: integerString(1, 25, 'expected whole seconds between 1 and 25').default(5),
  TWOKEY_CALLBACK_CONCURRENCY_PER_AGENT: integerString(1, 16, 'expected an integer between 1 and 16').default(4),
  TWOKEY_IDEMPOTENCY_MAX_RESPONSE_BYTES: integerString(1_024, 16 * 1024 * 1024, 'expected an integer between 1024 and 16777216 (bytes)').default(65_536),
  LOG_LEVEL: z.enum(LOG_LEVELS, { error: `expected one of: ${LOG_LEVELS.join(', ')}` }).default('info'),
  TWOKEY_AUDIT_KEY: z
    .string()
    .refine(
      (text) => {
        try {
          createSigner(parseAuditKey(text));
          return true;
        } catch {
          return false;
        }
      },
      // Checked here, not when the elected replica first signs: a bad key must stop start.
      { error: 'expected base64 of a 32-byte Ed25519 seed, or the PKCS#8 PEM of an Ed25519 key' },
    )
    .optional(),
  TWOKEY_AUDIT_KEY_FILE: z.string().optional(),
  TWOKEY_AUDIT_CHECKPOINTS: z.string().optional(),
  TWOKEY_AUDIT_WEBHOOK_URL: urlString(['http:', 'https:'], 'expected an http:// or https:// URL').optional(),
  TWOKEY_AUDIT_PUBLIC_KEY: auditPublicKeysSchema.optional(),
});

type EnvName = string;

/** Rules that span variables: a half-configured transport must stop start, not fail at first use. */
function crossVariableIssues(vars: Partial<Record<EnvName, string>>): string[] {
  return chatPlatforms.flatMap((platform) => platform.env.issues?.(vars) ?? []);
}

/**
 * Parses the environment once, at start. Empty strings count as unset (a `.env` line
 * `SLACK_BOT_TOKEN=` means "no Slack"). Throws a ConfigError listing every bad variable.
 */
export function loadEnv(source: NodeJS.ProcessEnv = process.env): Env {
  const vars: Partial<Record<EnvName, string>> = {};
  for (const name of Object.keys(envSchema.shape) as EnvName[]) {
    const value = source[name];
    if (value !== undefined && value !== '') vars[name] = value;
  }
  const result = envSchema.safeParse(vars);
  const issues = result.success ? [] : result.error.issues.map((issue) => `${String(issue.path[0])}: ${issue.message}`);
  issues.push(...crossVariableIssues(vars));
  if (!result.success || issues.length > 0) throw new ConfigError('Invalid environment:', issues);
  const env = result.data as unknown as Env;
  return Object.freeze(env);
}
