import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { freePort, PROCESS_TEST_TIMEOUT_MS, runCli, scratchDataDir, startServerProcess } from '../support/processes.js';
import { startConsoleTwokey } from './support.js';
import { existingEmbeddedDatabase } from '../support/embedded-template.js';

describe('twokey approvers link / revoke-sessions (CLI, embedded database)', () => {
  let removeDataDir: () => Promise<void>;
  let dataDir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    ({ dataDir, remove: removeDataDir } = await scratchDataDir('twokey-console-cli-'));
    await existingEmbeddedDatabase(dataDir);
    env = {
      TWOKEY_DATA_DIR: dataDir,
      PORT: String(await freePort()),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      DATABASE_URL: '',
      TWOKEY_CONFIG: '',
      TWOKEY_PUBLIC_URL: '',
    };
  });
  afterAll(() => removeDataDir());

  it(
    'prints a one-time link (last line) through a running server, and the link signs in once',
    async () => {
      // Output captured, as a log collector would: not a terminal, so no sign-in link goes there.
      const server = await startServerProcess({ ...env, LOG_LEVEL: 'info' });
      let url: string;
      try {
        // /healthz answers once it listens; the line about the console follows a moment later.
        await vi.waitFor(() => expect(server.output()).toContain('run `twokey approvers link NAME` for a sign-in link'), { timeout: 20_000 });
        expect(server.output()).not.toMatch(/\/console\/login\?token=|tk_link_/);
        // The link points at the server's own address, whatever port the CLI's environment names.
        const linked = await runCli(['approvers', 'link', 'operator'], { ...env, PORT: '1' });
        expect(linked.code).toBe(0);
        url = linked.stdout.trim().split('\n').at(-1) ?? '';
        expect(url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${env.PORT}/console/login\\?token=tk_link_[A-Za-z0-9_-]{43}$`));
        expect(linked.stdout).toContain('web:operator');
        // The server's log never shows the CLI's link token, nor any other.
        expect(server.output()).not.toContain(url.split('token=')[1] ?? 'missing');
        expect(server.output()).not.toContain('tk_link_');

        const nobody = await runCli(['approvers', 'link', 'web:mallory'], env);
        expect(nobody.stdout).toContain('approves no operation');
      } finally {
        await server.stop();
      }

      // The link was stored hashed in the data directory: a console on that database accepts it once.
      const database = await openDatabase({ dataDir });
      const twokey = await startConsoleTwokey({ driver: 'pglite', database });
      try {
        const token = new URL(url).searchParams.get('token') ?? '';
        expect((await twokey.page(`/console/login?token=${token}`)).body).toContain('Sign in as web:operator');
        expect((await twokey.form('/console/login', { token })).status).toBe(303);
        expect((await twokey.form('/console/login', { token })).status).toBe(403);
      } finally {
        await twokey.close();
        await database.close();
      }
    },
    PROCESS_TEST_TIMEOUT_MS,
  );

  it(
    'revoke-sessions ends the sessions of one approver',
    async () => {
      const database = await openDatabase({ dataDir });
      const twokey = await startConsoleTwokey({ driver: 'pglite', database });
      let cookie: string;
      try {
        ({ cookie } = await twokey.signIn('reviewer'));
      } finally {
        await twokey.close();
        await database.close();
      }
      const revoked = await runCli(['approvers', 'revoke-sessions', 'reviewer'], env);
      expect(revoked).toMatchObject({ code: 0 });
      expect(revoked.stdout).toContain('web:reviewer: 1 console session(s) ended');

      const again = await openDatabase({ dataDir });
      const after = await startConsoleTwokey({ driver: 'pglite', database: again });
      try {
        expect((await after.page('/console', cookie)).status).toBe(303);
      } finally {
        await after.close();
        await again.close();
      }
    },
    PROCESS_TEST_TIMEOUT_MS,
  );
});
