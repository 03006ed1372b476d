import { randomBytes } from 'node:crypto';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { vi } from 'vitest';
import type { Driver } from '../support/database.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import { freePort } from '../support/processes.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

export const SMTP_USER = 'twokey-mailer';
/** Not shaped like any known secret, so only twokey's own care (not the log scrubber) keeps it out of logs. */
export const SMTP_PASSWORD = `smtp-pass-${randomBytes(12).toString('hex')}`;
export const FROM = 'twokey <approvals@twokey.test>';
export const ALICE = 'email:alice@example.com';
export const BOB = 'email:bob@example.com';
/** Owns the agent and is on the approvers list too: the owner ban must hold for mail as for chat. */
export const CAROL = 'email:carol@example.com';
export const DOWNSTREAM_SECRET = 'downstream-secret-0123456789';

/** A local SMTP server speaking the real protocol (AUTH PLAIN/LOGIN, no TLS), keeping every mail it is given, parsed. */
export async function startMailServer() {
  const received: Array<{ to: string[]; mail: ParsedMail; raw: string }> = [];
  const server = new SMTPServer({
    // Its default looks up each client's address in DNS (a PTR query to the machine's nameserver,
    // off this machine) before greeting it: a test must not reach beyond loopback, nor wait on DNS.
    disableReverseLookup: true,
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    authMethods: ['PLAIN', 'LOGIN'],
    onAuth(auth, _session, callback) {
      if (auth.username === SMTP_USER && auth.password === SMTP_PASSWORD) return callback(null, { user: auth.username });
      return callback(new Error('Invalid username or password'));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        simpleParser(raw)
          .then((mail) => {
            received.push({ to: session.envelope.rcptTo.map((rcpt) => rcpt.address), mail, raw });
            callback();
          })
          .catch(callback);
      });
    },
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    received,
    /** The mails sent to one address, oldest first. */
    to: (address: string) => received.filter((entry) => entry.to.includes(address)),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export type MailServer = Awaited<ReturnType<typeof startMailServer>>;

export function eventually<T>(check: () => T | Promise<T>): Promise<T> {
  return vi.waitFor(check, { timeout: 10_000, interval: 20 });
}

export function emailConfigYaml(downstreamUrl: string): string {
  return `
operations:
  - name: upgrade_plan
    description: Change a customer's billing plan
    params:
      type: object
      required: [org, plan]
      properties:
        org: { type: string }
        plan: { type: string }
    summary: "{{agent}} is requesting to upgrade {{params.org}} to the {{params.plan}} plan."
    expiresIn: 10m
    approval:
      approvers: ["${ALICE}", "${BOB}", "${CAROL}"]
      quorum: 1
      email: {}
    commit: on_approve
    executor: { type: http, url: "${downstreamUrl}/upgrade", secret: "${DOWNSTREAM_SECRET}", timeout: 5s }
  - name: rotate_keys
    description: Rotate the production signing keys
    params:
      type: object
      required: [service]
      properties:
        service: { type: string }
    summary: "{{agent}} wants to rotate the keys of {{params.service}}."
    stepUp: passkey
    approval:
      approvers: ["${ALICE}"]
      quorum: 1
      email: {}
    commit: on_approve
    executor: { type: echo }
  - name: close_account
    description: Close a customer account
    params:
      type: object
      required: [org]
      properties:
        org: { type: string }
    summary: "{{agent}} wants to close the account of {{params.org}}."
    approval:
      approvers: ["${ALICE}", web:alice, "${BOB}"]
      quorum: 2
      email: {}
    commit: on_approve
    executor: { type: echo }
  - name: purge_backups
    description: Purge old backups
    params:
      type: object
      required: [bucket]
      properties:
        bucket: { type: string }
    summary: "{{agent}} wants to purge the backups in {{params.bucket}}."
    expiresIn: 10m
    approval:
      approvers: ["${ALICE}", "${BOB}"]
      quorum: 2
      email: {}
      remind: [2m]
      escalate: { after: 4m, approvers: ["email:dave@example.com"] }
    commit: on_approve
    executor: { type: echo }
people:
  - { name: alice, identities: ["${ALICE}", web:alice] }
`;
}

export interface EmailTwokey {
  twokey: TestTwokey;
  mail: MailServer;
  downstream: FakeDownstream;
  baseUrl: string;
  apiKey: string;
  close(): Promise<void>;
}

/** twokey listening on loopback with email configured from the environment, as an install would be. */
export async function startEmailTwokey(options: { driver: Driver; clock?: () => Date }): Promise<EmailTwokey> {
  const [mail, downstream, port] = await Promise.all([startMailServer(), startFakeDownstream(DOWNSTREAM_SECRET), freePort()]);
  const baseUrl = `http://127.0.0.1:${port}`;
  const twokey = await startTestTwokey({
    driver: options.driver,
    listen: true,
    clock: options.clock,
    configYaml: emailConfigYaml(downstream.url),
    env: {
      HOST: '127.0.0.1',
      PORT: String(port),
      TWOKEY_PUBLIC_URL: baseUrl,
      TWOKEY_SMTP_HOST: '127.0.0.1',
      TWOKEY_SMTP_PORT: String(mail.port),
      TWOKEY_SMTP_SECURE: 'none',
      TWOKEY_SMTP_USER: SMTP_USER,
      TWOKEY_SMTP_PASSWORD: SMTP_PASSWORD,
      TWOKEY_EMAIL_FROM: FROM,
    },
  });
  const { apiKey } = await twokey.createAgent('argus', { owners: [CAROL] });
  return {
    twokey,
    mail,
    downstream,
    baseUrl,
    apiKey,
    async close() {
      await twokey.close();
      await mail.close();
      await downstream.close();
    },
  };
}

/** The Approve and Reject links of a mail, from its HTML (what a person clicks) and checked against its text. */
export function linksOf(mail: ParsedMail): { approve: string; reject: string } {
  const html = typeof mail.html === 'string' ? mail.html : '';
  const hrefs = [...html.matchAll(/href="([^"]+)"/g)].map((match) => match[1]?.replace(/&amp;/g, '&') ?? '');
  const approve = hrefs.find((href) => href.includes('/email/approve/'));
  const reject = hrefs.find((href) => href.includes('/email/reject/'));
  if (!approve || !reject) throw new Error('the mail has no Approve and Reject links');
  if (!mail.text?.includes(approve) || !mail.text.includes(reject)) throw new Error('the text body does not carry the same links');
  return { approve, reject };
}

export const tokenOf = (link: string): string => link.slice(link.lastIndexOf('/') + 1);
