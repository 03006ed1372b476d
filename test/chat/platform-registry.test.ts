/**
 * The plug-in point of chat platforms (src/chat/README.md, "Adding a chat platform"): every
 * registered platform's declaration reaches each place that iterates the registry (identities,
 * the config's `approval.<name>` and `escalate.<name>`, the environment, the job catalogue and its
 * `clicks` lane, the MCP description) and its module loads with a `create`; and the registry's
 * building blocks take a platform they have never seen.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import { loadEnv } from '../../src/config/env.js';
import { destinationOf } from '../../src/core/chat-platform.js';
import { identityGrammar, type IdentityForm } from '../../src/core/identity.js';
import { approvalText } from '../../src/mcp/tools.js';
import { clickLane } from '../../src/outbox/inbox.js';
import { chatPlatformDeclarations, identities } from '../../src/platforms/index.js';
import { jobPayloadSchemas, parseJob } from '../../src/platforms/jobs.js';
import { platformModules } from '../../src/runtime/integrations.js';

const platforms = chatPlatformDeclarations.map((platform) => [platform.name, platform] as const);

describe('the registered chat platforms', () => {
  it('are at least Slack and Discord, each name once', () => {
    const names = chatPlatformDeclarations.map((platform) => platform.name);
    expect(names).toEqual(expect.arrayContaining(['slack', 'discord']));
    expect(new Set(names).size).toBe(names.length);
  });

  describe.each(platforms)('%s', (name, platform) => {
    const person = platform.identityForms.find((form) => form.person);

    it('declares its identities, which parse everywhere, persons and groups apart', () => {
      expect(person, 'a platform whose people cannot be named cannot be an approver').toBeDefined();
      for (const form of platform.identityForms) {
        expect(form.example.startsWith(`${name}:`), `${form.kind}: identities start with the platform's name`).toBe(true);
        expect(identities.parseIdentity(form.example)).toMatchObject({ kind: form.kind, text: form.example });
        expect(identities.parsePersonIdentity(form.example) !== null).toBe(form.person);
        expect(identities.parseIdentity(`${form.prefix}!`)).toBeNull();
        expect(identities.IDENTITY_FORMS).toContain(form.shown);
        if (form.person) expect(identities.PERSON_FORMS).toContain(form.shown);
        else expect(`"${form.example}" in approver.groups`.match(identities.platformGroupPattern)).toEqual([form.example]);
      }
    });

    it('takes its part under approval.<name> and escalate.<name>, and says where in the MCP description', () => {
      const approval = {
        approvers: [person?.example],
        [name]: platform.examples.approval,
        escalate: { after: '10m', approvers: ['web:escalation'], [name]: platform.examples.escalate },
      };
      const yaml = `operations:
  - name: refund
    description: Refund a payment
    params: { type: object, properties: { amount_cents: { type: integer } } }
    summary: "{{agent}} refunds"
    approval: ${JSON.stringify(approval)}
    executor: { type: echo }
`;
      const [operation] = parseConfig(yaml, {}, 'test.yaml').operations;
      expect(operation?.approval).toMatchObject({ [name]: platform.examples.approval, escalate: { [name]: platform.examples.escalate } });
      expect(destinationOf(operation?.approval, name)).not.toBeNull();
      expect(operation && approvalText(operation)).toContain(platform.describePart(platform.examples.approval));
      // An operation without the part is not on the platform, unless the platform reaches its
      // approvers directly (email): then naming one of them is enough.
      const without = parseConfig(yaml.replace(`,${JSON.stringify(name)}:${JSON.stringify(platform.examples.approval)}`, ''), {}, 'test.yaml').operations[0];
      if ('reachesApproversDirectly' in platform && platform.reachesApproversDirectly) expect(destinationOf(without?.approval, name)).not.toBeNull();
      else expect(destinationOf(without?.approval, name)).toBeNull();
      const noneOfItsOwn = parseConfig(
        yaml.replace(`,${JSON.stringify(name)}:${JSON.stringify(platform.examples.approval)}`, '').replace(JSON.stringify(person?.example), '"web:alice"'),
        {},
        'test.yaml',
      ).operations[0];
      expect(destinationOf(noneOfItsOwn?.approval, name)).toBeNull();
    });

    it('merges its variables into the environment, unconfigured when none is set', () => {
      const variables = Object.keys(platform.env.schema.shape);
      expect(variables.length).toBeGreaterThan(0);
      // Named after the platform (`TEAMS_…`), or under twokey's own prefix (`TWOKEY_SMTP_…`): never a bare name another platform could take.
      for (const variable of variables) expect(variable.startsWith(`${name.toUpperCase()}_`) || variable.startsWith('TWOKEY_'), variable).toBe(true);
      const env = loadEnv({});
      expect(platform.env.isConfigured(env as unknown as Record<string, unknown>)).toBe(false);
      // Its defaults apply: every variable is a key of the validated environment once parsed.
      const defaults = platform.env.schema.parse({}) as Record<string, unknown>;
      for (const [variable, value] of Object.entries(defaults)) expect((env as unknown as Record<string, unknown>)[variable]).toEqual(value);
    });

    it('puts its stored clicks in the job catalogue and the clicks lane', () => {
      // Email has none: its confirm page decides before it answers, so nothing is acknowledged first.
      const kinds = Object.keys(platform.clickJobs);
      const lane = clickLane(1);
      for (const kind of kinds) {
        expect((jobPayloadSchemas as unknown as Record<string, unknown>)[kind]).toBe(platform.clickJobs[kind]);
        expect(lane.kinds).toContain(kind);
        expect(parseJob(kind as never, { action: 'approve' })).toHaveProperty('problem');
      }
      expect(parseJob('chat.sync', { proposalId: 'prp_1', platform: name })).toHaveProperty('job');
    });

    it('has a module that creates its integration', async () => {
      const load = (platformModules as Record<string, () => Promise<{ create: unknown }>>)[name];
      expect(load, `no loader for ${name} in src/runtime/integrations.ts`).toBeTypeOf('function');
      expect((await load?.())?.create).toBeTypeOf('function');
    });
  });

  it('refuses a chat.sync for a platform that is not registered', () => {
    expect(parseJob('chat.sync', { proposalId: 'prp_1', platform: 'nowhere' })).toHaveProperty('problem');
  });
});

describe('a platform the registry has never seen', () => {
  const forms: IdentityForm[] = [
    { kind: 'pager_user', prefix: 'pager:', pattern: /^P[0-9]{3}$/, person: true, shown: 'pager:P…', example: 'pager:P123' },
    { kind: 'pager_team', prefix: 'pager:team:', pattern: /^T[0-9]{3}$/, person: false, shown: 'pager:team:T…', example: 'pager:team:T123' },
  ];

  it('joins the identity grammar: its forms parse, are listed first, and its groups are found in rules', () => {
    const grammar = identityGrammar(forms);
    expect(grammar.parseIdentity('pager:team:T123')).toEqual({ kind: 'pager_team', id: 'T123', text: 'pager:team:T123' });
    expect(grammar.parsePersonIdentity('pager:P123')).toMatchObject({ kind: 'pager_user' });
    expect(grammar.parsePersonIdentity('pager:team:T123')).toBeNull();
    // The longest prefix decides: a malformed group is not read as a user.
    expect(grammar.parseIdentity('pager:team:X')).toBeNull();
    expect(grammar.parseIdentity('web:alice')).toMatchObject({ kind: 'web' });
    expect(grammar.IDENTITY_FORMS).toBe('pager:P…, pager:team:T…, web:<name>, oidc:<claim> or oidc:group:<name>');
    expect(grammar.PERSON_FORMS).toBe('pager:P…, web:<name> or oidc:<claim>');
    expect(grammar.identityProblem('pager:team:T123', { person: true })).toBe(
      'expected one person (pager:P…, web:<name> or oidc:<claim>), not a group or role',
    );
    expect('"pager:team:T123" in approver.groups || "oidc:group:x" in approver.groups'.match(grammar.platformGroupPattern)).toEqual(['pager:team:T123']);
  });

  it('may not take a prefix or kind another form has', () => {
    expect(() => identityGrammar([...forms, { ...forms[0]!, kind: 'pager_other' }])).toThrow(/prefix "pager:"/);
    expect(() => identityGrammar([{ ...forms[0]!, prefix: 'web:', kind: 'pager_web' }])).toThrow(/prefix "web:"/);
    expect(() => identityGrammar([{ ...forms[0]!, pattern: /P[0-9]{3}/ }])).toThrow(/anchored/);
  });

  it('posts to its part’s channel, or by its own name when the part has none', () => {
    expect(destinationOf({ pager: { channel: 'ops' } }, 'pager')).toBe('ops');
    expect(destinationOf({ pager: { to: ['alice@example.com'] } }, 'pager')).toBe('pager');
    expect(destinationOf({ pager: { channel: '' } }, 'pager')).toBeNull();
    expect(destinationOf({}, 'pager')).toBeNull();
  });
});
