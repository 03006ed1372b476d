import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { mintApiKey, mintCallbackSecret, mintConfirmToken } from '../../src/core/secrets.js';
import { createLogger } from '../../src/runtime/server.js';
import { findSecrets } from '../support/secret-scan.js';

const samples = {
  confirmToken: mintConfirmToken(),
  apiKey: mintApiKey(),
  callbackSecret: mintCallbackSecret(),
  slackBot: 'xoxb-1234567890-abcdefghijkl',
  slackApp: 'xapp-1-A0123-456-abcdef',
  responseUrl: 'https://hooks.slack.com/actions/T0001/123456/abcdefABCDEF',
  discordWebhook: 'https://discord.com/api/v10/webhooks/123456789012345678/aW50ZXJhY3Rpb246MTIzNDU2Nzg5MDEyMzQ1Njc4OnRva2Vu',
};

describe('the secret scan that guards every suite', () => {
  it.each(Object.entries(samples))('recognises a %s', (_name, secret) => {
    expect(findSecrets(`some text ${secret} more text`)).not.toEqual([]);
  });

  it('finds a configured literal secret of any shape', () => {
    expect(findSecrets('signed with s3cr3t-signing-key!', ['s3cr3t-signing-key!'])).toHaveLength(1);
  });

  it("the logger's scrubber removes every one of them, wherever it sits in a log line", () => {
    const lines: string[] = [];
    const logger = createLogger('info', new Writable({ write: (chunk: Buffer, _e, done) => (lines.push(chunk.toString()), done()) }));
    for (const [name, secret] of Object.entries(samples)) {
      logger.info({ url: `/v1/x?token=${secret}`, nested: { note: `carry ${secret}` } }, `message with ${secret}`);
      logger.info({ err: new Error(`failed for ${secret}`) }, name);
      logger.info({ req: { headers: { authorization: `Bearer ${secret}`, 'x-confirmation-token': secret } } }, 'headers');
    }
    const output = lines.join('');
    expect(output).toContain('[REDACTED]');
    expect(findSecrets(output)).toEqual([]);
  });
});
