import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import { loadEnv } from '../../src/config/env.js';
import { ConfigError } from '../../src/config/errors.js';
import { identities } from '../../src/platforms/index.js';
import { teamsUserIdentity } from '../../src/teams/platform.js';
import { createPeople, samePerson } from '../../src/core/people.js';

const ALICE = '5f0c3a2e-8d4b-4c1a-9e7f-2b6d8a0c4e13';

const config = (approval: string, rest = '') => `${rest}
operations:
  - name: delete_workspace
    description: Delete a workspace
    params: { type: object, properties: { workspace: { type: string } } }
    summary: "{{agent}} wants to delete {{params.workspace}}."
    approval:
${approval}
    executor: { type: echo }
`;

function issues(run: () => unknown): readonly string[] {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error.issues;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('Teams in the configuration', () => {
  it('approval.teams.conversation and escalate.teams name where cards go; teams:<object id> approves', () => {
    const parsed = parseConfig(
      config(`      approvers: [teams:${ALICE}]
      teams: { conversation: "19:abc@thread.tacv2" }
      escalate: { after: 10m, approvers: [web:boss], teams: { conversation: "19:def@thread.tacv2" } }`),
      {},
      'test.yaml',
    );
    const approval = parsed.operations[0]?.approval;
    expect(approval?.approvers).toEqual([`teams:${ALICE}`]);
    expect(approval?.teams).toEqual({ conversation: '19:abc@thread.tacv2', channel: '19:abc@thread.tacv2' });
    expect(approval?.escalate?.teams).toEqual({ conversation: '19:def@thread.tacv2', channel: '19:def@thread.tacv2' });
  });

  it('refuses an object id that is not a lower-case GUID, and a conversation with spaces, naming the field', () => {
    expect(
      issues(() => parseConfig(config(`      approvers: [teams:${ALICE.toUpperCase()}]\n      teams: { conversation: "19 abc" }`), {}, 'test.yaml')),
    ).toEqual([
      expect.stringMatching(/^operations\[0\]\.approval\.approvers\[0\]: expected .*teams:<object id>/),
      'operations[0].approval.teams.conversation: expected a Teams conversation id (no spaces), e.g. "19:abc…@thread.tacv2"',
    ]);
    // What Teams sends is folded to lower case before it becomes an identity.
    expect(teamsUserIdentity(ALICE.toUpperCase())).toBe(`teams:${ALICE}`);
    expect(teamsUserIdentity('29:1abc')).toBeNull();
  });

  it('a Teams identity is one person, linkable under people: so quorum counts them once', () => {
    expect(identities.parseIdentity(`teams:${ALICE}`)).toEqual({ kind: 'teams_user', id: ALICE, text: `teams:${ALICE}` });
    const parsed = parseConfig(
      config(
        `      approvers: [teams:${ALICE}, web:alice, web:bob]\n      quorum: 2`,
        `people:\n  - { name: alice, identities: [web:alice, "teams:${ALICE}"] }\n`,
      ),
      {},
      'test.yaml',
    );
    expect(samePerson(createPeople(parsed.people), `teams:${ALICE}`, 'web:alice')).toBe(true);
  });

  it('TEAMS_APP_ID and TEAMS_APP_PASSWORD come together; ids must be GUIDs', () => {
    expect(issues(() => loadEnv({ TEAMS_APP_ID: ALICE }))).toEqual(['TEAMS_APP_PASSWORD: required when TEAMS_APP_ID is set']);
    expect(issues(() => loadEnv({ TEAMS_APP_PASSWORD: 'x' }))).toEqual(['TEAMS_APP_ID: required when TEAMS_APP_PASSWORD is set']);
    expect(issues(() => loadEnv({ TEAMS_APP_ID: 'twokey', TEAMS_APP_PASSWORD: 'x', TEAMS_TENANT_ID: 'contoso' }))).toEqual([
      "TEAMS_APP_ID: expected the Azure bot's app id (a GUID)",
      'TEAMS_TENANT_ID: expected an Entra tenant id (a GUID)',
    ]);
    expect(loadEnv({ TEAMS_APP_ID: ALICE, TEAMS_APP_PASSWORD: 'x' })).toMatchObject({ TEAMS_SERVICE_URL: 'https://smba.trafficmanager.net/teams/' });
  });
});
