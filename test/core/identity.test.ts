import { describe, expect, it } from 'vitest';
import { webIdentity } from '../../src/core/identity.js';
import { identities } from '../../src/platforms/index.js';

const { identityProblem, parseIdentity, parsePersonIdentity } = identities;
import { approverKind } from '../../src/config/config-file.js';

describe('the identity grammar', () => {
  it('names each form', () => {
    expect(parseIdentity('slack:U0ALICE')).toEqual({ kind: 'slack_user', id: 'U0ALICE', text: 'slack:U0ALICE' });
    expect(parseIdentity('slack:W012ABC')).toMatchObject({ kind: 'slack_user' });
    expect(parseIdentity('slack:group:S0OPS')).toEqual({ kind: 'slack_group', id: 'S0OPS', text: 'slack:group:S0OPS' });
    expect(parseIdentity('discord:user:12345678901234567')).toMatchObject({ kind: 'discord_user', id: '12345678901234567' });
    expect(parseIdentity('discord:role:12345678901234567890')).toMatchObject({ kind: 'discord_role' });
    expect(parseIdentity('web:ops.team@acme')).toEqual({ kind: 'web', id: 'ops.team@acme', text: 'web:ops.team@acme' });
  });

  it('a Discord snowflake is 17 to 20 digits: 16 and 21 are refused everywhere', () => {
    expect(parseIdentity(`discord:user:${'1'.repeat(16)}`)).toBeNull();
    expect(parseIdentity(`discord:user:${'1'.repeat(17)}`)).not.toBeNull();
    expect(parseIdentity(`discord:user:${'1'.repeat(20)}`)).not.toBeNull();
    expect(parseIdentity(`discord:user:${'1'.repeat(21)}`)).toBeNull();
    expect(parseIdentity(`discord:role:${'1'.repeat(15)}`)).toBeNull();
    // The config, the agents' owners and `--as` share the rule: a 15-16 digit owner can no longer be accepted.
    expect(approverKind(`discord:user:${'1'.repeat(16)}`)).toBeUndefined();
    expect(parsePersonIdentity(`discord:user:${'1'.repeat(16)}`)).toBeNull();
  });

  it('refuses lookalikes', () => {
    for (const text of [
      'slack:u0alice',
      'slack:S0OPS',
      'slack:group:U0ALICE',
      'slack:group:',
      'web:',
      'web:-x',
      'web:a b',
      'discord:user:abc',
      'Web:alice',
      ' web:alice',
      'mail:alice',
      42,
      null,
    ]) {
      expect(parseIdentity(text)).toBeNull();
    }
    expect(parseIdentity(`web:${'a'.repeat(64)}`)).not.toBeNull();
    expect(parseIdentity(`web:${'a'.repeat(65)}`)).toBeNull();
  });

  it('a person is one user, never a group or role', () => {
    expect(parsePersonIdentity('slack:U0ALICE')).not.toBeNull();
    expect(parsePersonIdentity('slack:group:S0OPS')).toBeNull();
    expect(parsePersonIdentity('discord:role:12345678901234567')).toBeNull();
    expect(identityProblem('slack:group:S0OPS', { person: true })).toContain('not a group or role');
    expect(identityProblem('slack:group:S0OPS')).toBeNull();
    expect(identityProblem('nobody')).toContain('web:<name>');
  });

  it('web names: the "web:" is optional, and the grammar is the one the config uses', () => {
    expect(webIdentity('operator')).toBe('web:operator');
    expect(webIdentity('web:operator')).toBe('web:operator');
    expect(webIdentity('_hidden')).toBeNull();
    expect(approverKind('web:_hidden')).toBeUndefined();
  });
});
