import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSmtpSender } from '../../src/email/transport.js';
import { DeliveryError } from '../../src/lib/delivery-error.js';
import { freePort } from '../support/processes.js';
import { SMTP_PASSWORD, SMTP_USER, startMailServer, type MailServer } from './helpers.js';

const mail = { to: 'alice@example.com', subject: 'Hello', text: 'text', html: '<p>html</p>', messageId: '<prp_1.abc.request@twokey.test>' };

describe('SMTP through nodemailer', () => {
  let server: MailServer;
  beforeAll(async () => {
    server = await startMailServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it('sends with the login given, the Message-ID kept, and marks the mail as automated', async () => {
    const sender = createSmtpSender({
      host: '127.0.0.1',
      port: server.port,
      security: 'none',
      user: SMTP_USER,
      password: SMTP_PASSWORD,
      from: 'approvals@twokey.test',
    });
    await sender.send({ ...mail, inReplyTo: '<earlier@twokey.test>', references: '<earlier@twokey.test>' });
    sender.close();
    const [received] = server.to('alice@example.com');
    expect(received?.mail.messageId).toBe(mail.messageId);
    expect(received?.mail.inReplyTo).toBe('<earlier@twokey.test>');
    expect(received?.mail.headers.get('auto-submitted')).toBe('auto-generated');
  });

  it('turns refused credentials into a permanent failure that does not repeat the password or the server’s words', async () => {
    const wrong = `wrong-${SMTP_PASSWORD}`;
    const sender = createSmtpSender({
      host: '127.0.0.1',
      port: server.port,
      security: 'none',
      user: SMTP_USER,
      password: wrong,
      from: 'approvals@twokey.test',
    });
    const failure = await sender.send(mail).then(
      () => null,
      (error: unknown) => error,
    );
    sender.close();
    expect(failure).toBeInstanceOf(DeliveryError);
    expect((failure as DeliveryError).options.permanent).toBe(true);
    expect((failure as DeliveryError).message).toBe('SMTP delivery failed (535)');
    expect(JSON.stringify(failure)).not.toContain(wrong);
  });

  it('turns an unreachable server into a failure the outbox retries', async () => {
    const sender = createSmtpSender({ host: '127.0.0.1', port: await freePort(), security: 'none', from: 'approvals@twokey.test', timeoutMs: 2_000 });
    const failure = await sender.send(mail).then(
      () => null,
      (error: unknown) => error,
    );
    sender.close();
    expect(failure).toBeInstanceOf(DeliveryError);
    expect((failure as DeliveryError).options.permanent).toBe(false);
  });

  it('refuses to send without TLS when STARTTLS is required and the server offers none', async () => {
    const sender = createSmtpSender({ host: '127.0.0.1', port: server.port, security: 'starttls', from: 'approvals@twokey.test', timeoutMs: 2_000 });
    const failure = await sender.send(mail).then(
      () => null,
      (error: unknown) => error,
    );
    sender.close();
    expect(failure).toBeInstanceOf(DeliveryError);
  });
});
