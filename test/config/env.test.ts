import { describe, expect, it } from 'vitest';
import { loadEnv } from '../../src/config/env.js';
import { ConfigError } from '../../src/config/errors.js';

function envError(source: NodeJS.ProcessEnv): ConfigError {
  try {
    loadEnv(source);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected loadEnv to throw');
}

describe('loadEnv', () => {
  it('applies the documented defaults to an empty environment', () => {
    expect(loadEnv({})).toEqual({
      PORT: 8080,
      HOST: '127.0.0.1',
      TWOKEY_DATA_DIR: './data',
      TWOKEY_MCP_WAIT: 50,
      SLACK_API_URL: 'https://slack.com/api/',
      DISCORD_GATEWAY: false,
      DISCORD_API_URL: 'https://discord.com/api',
      TEAMS_SERVICE_URL: 'https://smba.trafficmanager.net/teams/',
      TEAMS_OPENID_METADATA_URL: 'https://login.botframework.com/v1/.well-known/openidconfiguration',
      TWOKEY_SMTP_PORT: 587,
      TWOKEY_SMTP_SECURE: 'starttls',
      AGENR_EXECUTE_POLICY: 'open',
      AGENR_MAX_EXECUTE_AMOUNT: 100,
      TWOKEY_MAX_LONG_POLLS_PER_AGENT: 20,
      TWOKEY_MAX_PENDING_PER_AGENT: 100,
      TWOKEY_MAX_FAILED_AUTH_PER_MINUTE: 20,
      TWOKEY_IDEMPOTENCY_MAX_RESPONSE_BYTES: 65_536,
      TWOKEY_MIN_FREE_DISK_MB: 128,
      TWOKEY_WATCHDOG_SECONDS: 30,
      TWOKEY_TRUST_PROXY: false,
      TWOKEY_CALLBACK_TIMEOUT: 5,
      TWOKEY_CALLBACK_CONCURRENCY_PER_AGENT: 4,
      LOG_LEVEL: 'info',
    });
  });

  it('takes TWOKEY_MIN_FREE_DISK_MB in whole MiB (0 disables) and TWOKEY_WATCHDOG_SECONDS in whole seconds up to an hour (0 disables)', () => {
    expect(loadEnv({ TWOKEY_MIN_FREE_DISK_MB: '0', TWOKEY_WATCHDOG_SECONDS: '0' })).toMatchObject({ TWOKEY_MIN_FREE_DISK_MB: 0, TWOKEY_WATCHDOG_SECONDS: 0 });
    expect(loadEnv({ TWOKEY_MIN_FREE_DISK_MB: '2048', TWOKEY_WATCHDOG_SECONDS: '3600' })).toMatchObject({
      TWOKEY_MIN_FREE_DISK_MB: 2048,
      TWOKEY_WATCHDOG_SECONDS: 3600,
    });
    expect(() => loadEnv({ TWOKEY_MIN_FREE_DISK_MB: '-1' })).toThrow(/TWOKEY_MIN_FREE_DISK_MB: expected whole MiB/);
    expect(() => loadEnv({ TWOKEY_MIN_FREE_DISK_MB: '1.5' })).toThrow(/TWOKEY_MIN_FREE_DISK_MB/);
    expect(() => loadEnv({ TWOKEY_WATCHDOG_SECONDS: '3601' })).toThrow(/TWOKEY_WATCHDOG_SECONDS: expected whole seconds/);
    expect(() => loadEnv({ TWOKEY_WATCHDOG_SECONDS: '30s' })).toThrow(/TWOKEY_WATCHDOG_SECONDS/);
  });

  it('parses typed values and ignores unrelated variables', () => {
    const env = loadEnv({
      PORT: '3000',
      DATABASE_URL: 'postgresql://twokey:pw@db:5432/twokey',
      DISCORD_GATEWAY: 'true',
      DISCORD_BOT_TOKEN: 'bot-token',
      AGENR_EXECUTE_POLICY: 'strict',
      AGENR_MAX_EXECUTE_AMOUNT: '0',
      LOG_LEVEL: 'silent',
      PATH: '/usr/bin',
    });
    expect(env.PORT).toBe(3000);
    expect(env.DATABASE_URL).toBe('postgresql://twokey:pw@db:5432/twokey');
    expect(env.DISCORD_GATEWAY).toBe(true);
    expect(env.AGENR_EXECUTE_POLICY).toBe('strict');
    expect(env.AGENR_MAX_EXECUTE_AMOUNT).toBe(0);
    expect(env.LOG_LEVEL).toBe('silent');
    expect(env).not.toHaveProperty('PATH');
  });

  it('treats empty strings as unset', () => {
    const env = loadEnv({ PORT: '', DATABASE_URL: '', SLACK_BOT_TOKEN: '', LOG_LEVEL: '' });
    expect(env.PORT).toBe(8080);
    expect(env.DATABASE_URL).toBeUndefined();
    expect(env.SLACK_BOT_TOKEN).toBeUndefined();
    expect(env.LOG_LEVEL).toBe('info');
  });

  it('takes TWOKEY_MCP_WAIT in whole seconds from 0 to 300', () => {
    expect(loadEnv({ TWOKEY_MCP_WAIT: '0' }).TWOKEY_MCP_WAIT).toBe(0);
    expect(loadEnv({ TWOKEY_MCP_WAIT: '300' }).TWOKEY_MCP_WAIT).toBe(300);
    expect(() => loadEnv({ TWOKEY_MCP_WAIT: '301' })).toThrow(/TWOKEY_MCP_WAIT: expected whole seconds between 0 and 300/);
    expect(() => loadEnv({ TWOKEY_MCP_WAIT: '1.5' })).toThrow(/TWOKEY_MCP_WAIT/);
  });

  it('takes TWOKEY_TRUST_PROXY as true, false or a list of proxy addresses, and nothing else', () => {
    expect(loadEnv({ TWOKEY_TRUST_PROXY: 'true' }).TWOKEY_TRUST_PROXY).toBe(true);
    expect(loadEnv({ TWOKEY_TRUST_PROXY: 'false' }).TWOKEY_TRUST_PROXY).toBe(false);
    expect(loadEnv({ TWOKEY_TRUST_PROXY: '10.0.0.0/8, 192.168.1.7,::1,loopback' }).TWOKEY_TRUST_PROXY).toEqual([
      '10.0.0.0/8',
      '192.168.1.7',
      '::1',
      'loopback',
    ]);
    // A hop count is refused: fastify 5 trusts nobody with one, which would silently do nothing.
    for (const bad of ['1', 'yes', '10.0.0.0/33', 'proxy.internal', '10.0.0.1,']) {
      expect(envError({ TWOKEY_TRUST_PROXY: bad }).issues).toEqual([
        'TWOKEY_TRUST_PROXY: expected true, false, or a comma-separated list of proxy IP addresses, CIDRs, loopback, linklocal or uniquelocal',
      ]);
    }
  });

  it('takes the callback timeout and per-agent concurrency in range', () => {
    expect(loadEnv({ TWOKEY_CALLBACK_TIMEOUT: '2', TWOKEY_CALLBACK_CONCURRENCY_PER_AGENT: '1' })).toMatchObject({
      TWOKEY_CALLBACK_TIMEOUT: 2,
      TWOKEY_CALLBACK_CONCURRENCY_PER_AGENT: 1,
    });
    expect(envError({ TWOKEY_CALLBACK_TIMEOUT: '0' }).issues).toEqual(['TWOKEY_CALLBACK_TIMEOUT: expected whole seconds between 1 and 25']);
    expect(envError({ TWOKEY_CALLBACK_CONCURRENCY_PER_AGENT: '17' }).issues).toEqual([
      'TWOKEY_CALLBACK_CONCURRENCY_PER_AGENT: expected an integer between 1 and 16',
    ]);
  });

  it('takes TWOKEY_AUDIT_PUBLIC_KEY as one or more base64 Ed25519 public keys', () => {
    const one = Buffer.alloc(32, 1).toString('base64');
    const two = Buffer.alloc(32, 2).toString('base64');
    expect(loadEnv({ TWOKEY_AUDIT_PUBLIC_KEY: `${one}, ${two}` }).TWOKEY_AUDIT_PUBLIC_KEY).toEqual([one, two]);
    for (const bad of [Buffer.alloc(31, 1).toString('base64'), 'not a key', `${one},`]) {
      expect(envError({ TWOKEY_AUDIT_PUBLIC_KEY: bad }).issues[0]).toMatch(/^TWOKEY_AUDIT_PUBLIC_KEY: expected one or more base64 Ed25519 public keys/);
    }
  });

  it('names the variable in the message', () => {
    expect(() => loadEnv({ PORT: '70000' })).toThrow(ConfigError);
    expect(envError({ PORT: '70000' }).issues).toEqual(['PORT: expected an integer between 1 and 65535']);
    expect(envError({ PORT: '80abc' }).issues).toEqual(['PORT: expected an integer between 1 and 65535']);
  });

  it('lists every bad variable at once', () => {
    const error = envError({
      PORT: '0',
      DATABASE_URL: 'mysql://db/twokey',
      TWOKEY_PUBLIC_URL: 'ftp://example.com',
      DISCORD_GATEWAY: 'yes',
      AGENR_EXECUTE_POLICY: 'lenient',
      AGENR_MAX_EXECUTE_AMOUNT: '-1',
      LOG_LEVEL: 'verbose',
    });
    expect(error.issues.map((issue) => issue.split(':')[0])).toEqual([
      'PORT',
      'DATABASE_URL',
      'TWOKEY_PUBLIC_URL',
      'DISCORD_GATEWAY',
      'AGENR_EXECUTE_POLICY',
      'AGENR_MAX_EXECUTE_AMOUNT',
      'LOG_LEVEL',
    ]);
    expect(error.message).toContain('DATABASE_URL: expected a postgres:// or postgresql:// URL');
  });

  it('never repeats the value of a secret in the message', () => {
    const secretKey = 'zz'.repeat(20) + 'not-hex-s3cr3t-value';
    const error = envError({
      DISCORD_PUBLIC_KEY: secretKey,
      DATABASE_URL: 'mysql://admin:hunter2@db/twokey',
      SLACK_BOT_TOKEN: 'xoxb-s3cr3t-token',
      DISCORD_BOT_TOKEN: 'discord-s3cr3t-token',
    });
    expect(error.issues).toEqual([
      'DATABASE_URL: expected a postgres:// or postgresql:// URL',
      'DISCORD_PUBLIC_KEY: expected 64 hexadecimal characters',
      'SLACK_SIGNING_SECRET: required when SLACK_BOT_TOKEN is set (or set SLACK_APP_TOKEN for Socket Mode)',
    ]);
    for (const secret of ['s3cr3t', 'hunter2', 'zzzz']) expect(error.message).not.toContain(secret);
  });

  describe('Slack variables go together', () => {
    it('accepts HTTP mode (bot token + signing secret) and Socket Mode (bot token + app token)', () => {
      expect(loadEnv({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_SIGNING_SECRET: 's' }).SLACK_SIGNING_SECRET).toBe('s');
      expect(loadEnv({ SLACK_BOT_TOKEN: 'xoxb-1', SLACK_APP_TOKEN: 'xapp-1' }).SLACK_APP_TOKEN).toBe('xapp-1');
    });

    it('names the missing half', () => {
      expect(envError({ SLACK_SIGNING_SECRET: 's' }).issues).toEqual(['SLACK_BOT_TOKEN: required when SLACK_SIGNING_SECRET is set']);
      expect(envError({ SLACK_BOT_TOKEN: 'xoxb-1' }).issues[0]).toMatch(/^SLACK_SIGNING_SECRET: required/);
      expect(envError({ SLACK_APP_TOKEN: 'xapp-1' }).issues).toEqual(['SLACK_BOT_TOKEN: required when SLACK_APP_TOKEN is set (Socket Mode)']);
    });
  });

  it('requires the Discord bot token for the gateway', () => {
    expect(envError({ DISCORD_GATEWAY: 'true' }).issues).toEqual(['DISCORD_BOT_TOKEN: required when DISCORD_GATEWAY is true']);
  });

  it('checks the Discord public key is 64 hex characters', () => {
    const key = 'a'.repeat(64);
    expect(loadEnv({ DISCORD_PUBLIC_KEY: key, DISCORD_BOT_TOKEN: 'bot' }).DISCORD_PUBLIC_KEY).toBe(key);
    expect(envError({ DISCORD_PUBLIC_KEY: 'a'.repeat(63), DISCORD_BOT_TOKEN: 'bot' }).issues).toEqual([
      'DISCORD_PUBLIC_KEY: expected 64 hexadecimal characters',
    ]);
  });
});

describe('loadEnv: Discord settings go together', () => {
  it('refuses DISCORD_PUBLIC_KEY without DISCORD_BOT_TOKEN, naming the missing variable', () => {
    expect(() => loadEnv({ DISCORD_PUBLIC_KEY: 'a'.repeat(64) })).toThrow(/DISCORD_BOT_TOKEN: required when DISCORD_PUBLIC_KEY is set/);
  });

  it('refuses resource limits that are not positive integers in range, naming the variable', () => {
    expect(() => loadEnv({ TWOKEY_MAX_PENDING_PER_AGENT: '0' })).toThrow(/TWOKEY_MAX_PENDING_PER_AGENT: expected an integer between 1 and 1000000/);
    expect(() => loadEnv({ TWOKEY_IDEMPOTENCY_MAX_RESPONSE_BYTES: '10' })).toThrow(/TWOKEY_IDEMPOTENCY_MAX_RESPONSE_BYTES/);
    expect(loadEnv({ TWOKEY_MAX_LONG_POLLS_PER_AGENT: '5' }).TWOKEY_MAX_LONG_POLLS_PER_AGENT).toBe(5);
  });
});

describe('loadEnv: email settings go together', () => {
  it('names what email needs besides the SMTP host', () => {
    expect(envError({ TWOKEY_SMTP_HOST: 'smtp.example.com' }).issues).toEqual([
      'TWOKEY_EMAIL_FROM: required when TWOKEY_SMTP_HOST is set',
      'TWOKEY_PUBLIC_URL: required when TWOKEY_SMTP_HOST is set (approval mails link to it)',
    ]);
    expect(envError({ TWOKEY_SMTP_PASSWORD: 'pw' }).issues).toEqual(['TWOKEY_SMTP_USER: required when TWOKEY_SMTP_PASSWORD is set']);
  });

  it('checks the security mode, the port and the From address', () => {
    const env = loadEnv({
      TWOKEY_SMTP_HOST: 'smtp.example.com',
      TWOKEY_SMTP_PORT: '465',
      TWOKEY_SMTP_SECURE: 'tls',
      TWOKEY_EMAIL_FROM: 'twokey <approvals@example.com>',
      TWOKEY_PUBLIC_URL: 'https://twokey.example.com',
    });
    expect(env).toMatchObject({ TWOKEY_SMTP_PORT: 465, TWOKEY_SMTP_SECURE: 'tls', TWOKEY_EMAIL_FROM: 'twokey <approvals@example.com>' });
    expect(envError({ TWOKEY_SMTP_SECURE: 'ssl' }).issues).toEqual(['TWOKEY_SMTP_SECURE: expected one of: tls, starttls, none']);
    expect(envError({ TWOKEY_SMTP_PORT: '0' }).issues).toEqual(['TWOKEY_SMTP_PORT: expected a port between 1 and 65535']);
    expect(envError({ TWOKEY_EMAIL_FROM: 'not an address' }).issues[0]).toMatch(/^TWOKEY_EMAIL_FROM: expected an address/);
  });
});
