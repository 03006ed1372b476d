import { describe, expect, it } from 'vitest';
import { redactSecretValues, scrubAnySecret, scrubSecrets } from '../../src/lib/secrets.js';

describe('scrubSecrets', () => {
  it.each([
    ['an agent key', 'key tk_agent_AbCdEf123456 sent'],
    ['a confirmation token', 'token tk_conf_AbCdEf123456 sent'],
    ['a sign-in link', 'open /console/sign-in/tk_link_AbCdEf123456 now'],
    ['a callback secret', 'signed with whsec_AbCdEf123456'],
    ['a Slack bot token', 'Authorization: Bearer xoxb-1234-5678-abcdef'],
    ['a Slack app token', 'xapp-1-A0123-456789-abcdef'],
    ['a Slack response_url', 'POST https://hooks.slack.com/actions/T0/123/abcDEF then'],
    ['a Discord bot token', `Bot ${'M'.padEnd(24, 'a')}.abcdef.${'x'.repeat(27)}`],
  ])('redacts %s', (_what, text) => {
    const scrubbed = scrubSecrets(text);
    expect(scrubbed).toContain('[REDACTED]');
    expect(scrubbed).not.toMatch(/tk_(agent|conf|link)_|whsec_|xox|xapp-|hooks\.slack\.com|\.abcdef\./);
  });

  it('keeps the public part of a Discord webhook path and redacts its token', () => {
    const url = `https://discord.com/api/v10/webhooks/123456789012345678/${'T'.repeat(40)}/messages/@original`;
    expect(scrubSecrets(url)).toBe('https://discord.com/api/v10/webhooks/123456789012345678/[REDACTED]/messages/@original');
  });

  it('redacts every occurrence, and leaves text without secrets as it is', () => {
    expect(scrubSecrets('tk_agent_AAAAAAAAAA and tk_agent_BBBBBBBBBB')).toBe('[REDACTED] and [REDACTED]');
    const plain = 'proposal prop_123 approved by slack:U0ALICE (tk_ is only a prefix)';
    expect(scrubSecrets(plain)).toBe(plain);
  });
});

describe('scrubAnySecret: other providers’ keys, for what reaches chat', () => {
  it.each([
    ['a Stripe live key', 'charged with sk_live_51Hc9xQ2eZvKYlo2C8aBcDeF'],
    ['a Stripe test key', 'sk_test_4eC39HqLyjWDarjtT1zdp7dc'],
    ['a Stripe restricted key', 'rk_live_51Hc9xQ2eZvKYlo2C8aBcDeF'],
    ['an AWS access key id', 'id=AKIAIOSFODNN7EXAMPLE;'],
    ['an AWS secret key', 'secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY end'],
    ['a GitHub token', `ghp_${'a1B2c3D4e5'.repeat(4).slice(0, 36)}`],
    ['a GitHub fine-grained token', `github_pat_11ABCDEFG0${'x'.repeat(40)}`],
    ['an OpenAI key', `sk-proj-${'Zx9Yw8Vu7T'.repeat(4)}`],
    ['an Anthropic key', `sk-ant-api03-${'Q'.repeat(40)}`],
    ['a Slack user token', 'xoxp-1111-2222-3333-abcdef'],
    ['a JSON Web Token', 'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijklmnop'],
    ['a private key', '-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----'],
    ['a password in a URL', 'postgres://app:hunter2hunter2@db.internal/app'],
  ])('redacts %s', (_what, text) => {
    const scrubbed = scrubAnySecret(text);
    expect(scrubbed).toContain('[REDACTED]');
    expect(scrubbed).not.toMatch(/sk_|rk_|AKIA|wJalr|gh[po]_|github_pat|sk-|xoxp|eyJ|MIIEow|hunter2/);
  });

  it('leaves ids, hex digests and ordinary words alone', () => {
    const plain = 'refund re_1001 for order ord_42, commit 3f786850e387550fdab836ed7e6dc881de23001b, task-list and disk-usage';
    expect(scrubAnySecret(plain)).toBe(plain);
  });
});

describe('redactSecretValues', () => {
  it('replaces every value under a secret-looking key, whole, at any depth and in any case', () => {
    const redacted = redactSecretValues({
      status: 'ok',
      Password: 'hunter2',
      db: { user: 'app', credentials: { user: 'x', pass: 'y' } },
      items: [{ apiKey: 42, name: 'widget' }],
      AUTHORIZATION: 'Basic dXNlcjpwYXNz',
      idempotencyKey: 'prp_1',
      note: 'uses sk_live_51Hc9xQ2eZvKYlo2C8aBcDeF',
    });
    expect(redacted).toEqual({
      status: 'ok',
      Password: '[REDACTED]',
      db: { user: 'app', credentials: '[REDACTED]' },
      items: [{ apiKey: '[REDACTED]', name: 'widget' }],
      AUTHORIZATION: '[REDACTED]',
      idempotencyKey: '[REDACTED]',
      note: 'uses [REDACTED]',
    });
  });
});
