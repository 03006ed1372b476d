import { describe, expect, it } from 'vitest';
import { scrubSecrets } from '../../src/lib/secrets.js';

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
