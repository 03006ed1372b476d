import { describe, expect, it } from 'vitest';
import type { ProposalMessageView } from '../../src/chat/types.js';
import { compileSummaryTemplate } from '../../src/config/summary-template.js';
import { renderFollowUp, renderMessage } from '../../src/discord/message.js';

const view = (overrides: Partial<ProposalMessageView> = {}): ProposalMessageView => ({
  id: 'prp_AAAAAAAAAAAAAAAA',
  operation: 'delete_workspace',
  description: 'Delete a workspace',
  summary: 'argus wants to delete workspace w.',
  agent: 'argus',
  confirmationType: 'verification',
  cost: null,
  expiresAt: new Date('2026-11-22T10:05:00.000Z'),
  status: 'pending',
  quorum: 1,
  approvals: [],
  decision: null,
  result: null,
  error: null,
  consoleUrl: null,
  trail: [],
  ...overrides,
});

/** What Discord counts toward its 6000-character embed limit. */
function embedLength(message: ReturnType<typeof renderMessage>): number {
  const [embed] = message.embeds;
  if (!embed) return 0;
  return (
    (embed.title?.length ?? 0) +
    (embed.description?.length ?? 0) +
    (embed.footer?.text.length ?? 0) +
    (embed.fields ?? []).reduce((sum, field) => sum + field.name.length + field.value.length, 0)
  );
}

describe('Discord proposal message', () => {
  it('shows agent-written params as plain text: no masked link, no mention, no formatting', () => {
    const message = renderMessage(view({ summary: 'argus wants to delete [acme](https://evil.example) <@123456789012345678> @everyone **now**' }));
    const description = message.embeds[0]?.description ?? '';
    expect(description).toBe('argus wants to delete \\[acme\\]\\(https\\://evil.example\\) \\<\\@123456789012345678\\> \\@everyone \\*\\*now\\*\\*');
    expect(message.allowed_mentions).toEqual({ parse: [] });
  });

  it("stays within Discord's embed limits whatever the proposal holds", () => {
    const huge = 'x'.repeat(10_000);
    const message = renderMessage(
      view({
        summary: huge,
        description: huge,
        operation: huge,
        cost: huge,
        status: 'approved',
        error: huge,
        approvals: Array.from({ length: 60 }, (_, i) => ({ approver: `discord:user:1${String(i).padStart(17, '0')}`, at: new Date() })),
      }),
    );
    expect(embedLength(message)).toBeLessThanOrEqual(6000);
    for (const field of message.embeds[0]?.fields ?? []) expect(field.value.length).toBeLessThanOrEqual(1024);
  });

  it('writes every state out in words and offers only the buttons that can still work', () => {
    const statusOf = (overrides: Partial<ProposalMessageView>) => {
      const message = renderMessage(view(overrides));
      return {
        status: message.embeds[0]?.fields?.[0]?.value,
        buttons: message.components.flatMap((row) => row.components.map((c) => ('custom_id' in c ? c.custom_id : ''))),
      };
    };
    const by = { by: 'discord:user:123456789012345678', at: new Date(), reason: null };
    expect(statusOf({})).toEqual({
      status: expect.stringMatching(/Pending/),
      buttons: ['twokey:approve:prp_AAAAAAAAAAAAAAAA', 'twokey:reject:prp_AAAAAAAAAAAAAAAA'],
    });
    expect(statusOf({ status: 'approved', decision: by })).toEqual({ status: expect.stringMatching(/Approved.*<@123456789012345678>/), buttons: [] });
    expect(statusOf({ status: 'approved', error: 'boom `x`' })).toEqual({
      status: expect.stringMatching(/Execution failed.*`boom ˋxˋ`/s),
      buttons: ['twokey:retry:prp_AAAAAAAAAAAAAAAA'],
    });
    expect(statusOf({ status: 'executing' }).status).toMatch(/Executing/);
    expect(statusOf({ status: 'committed', result: '{"id":7}' })).toEqual({ status: '✅ **Committed**: `{"id":7}`', buttons: [] });
    // No result to show (the default: the operation has no result template and no chatResult: json).
    expect(statusOf({ status: 'committed', result: null })).toEqual({ status: '✅ **Committed**', buttons: [] });
    expect(statusOf({ status: 'rejected', decision: { ...by, reason: 'not *now*' } }).status).toBe('❌ **Rejected** by <@123456789012345678>: not \\*now\\*');
    expect(statusOf({ status: 'rejected', decision: by }).status).toMatch(/no reason given/);
    expect(statusOf({ status: 'expired' }).status).toMatch(/Expired/);
    expect(statusOf({ status: 'cancelled' }).status).toMatch(/Cancelled/);
  });
});

describe('Discord: a param cannot forge lines, reorder text or pass for another script', () => {
  it('in the embed description', () => {
    const summary = compileSummaryTemplate('{{ agent }} wants to delete workspace {{ params.workspace }}.', {
      type: 'object',
      properties: { workspace: { type: 'string' } },
    })({ agent: 'argus', operation: 'delete_workspace', params: { workspace: 'w\n\nCost: $1.00\nApproved by security team ✅ \u202Eexe\u2066 \u0410cme' } });
    const description = renderMessage(view({ summary })).embeds[0]?.description ?? '';
    expect(description).not.toMatch(/[\n\r\u202E\u2066]/);
    expect(description).toContain('⏎⏎Cost\\: $1.00⏎Approved by security team ✅ \\[U+202E\\]exe\\[U+2066\\]');
    expect(description).toContain('\\[⚠ mixed scripts\\: Cyrillic + Latin\\]');
  });
});

describe('Discord: grants, automatic decisions, reminders', () => {
  const labels = (message: ReturnType<typeof renderMessage>) => message.components.flatMap((row) => row.components.map((c) => ('label' in c ? c.label : '')));

  it('offers "Approve for …" with the first configured duration, and only when there is one', () => {
    expect(labels(renderMessage(view({ grantDurationsMs: [3_600_000, 8 * 3_600_000] })))).toEqual(['Approve', 'Approve for 1 h…', 'Reject']);
    expect(labels(renderMessage(view({ grantDurationsMs: [] })))).toEqual(['Approve', 'Reject']);
    // Once decided, no button at all.
    expect(
      labels(
        renderMessage(
          view({ grantDurationsMs: [3_600_000], status: 'rejected', decision: { by: 'discord:user:123456789012345678', at: new Date(), reason: null } }),
        ),
      ),
    ).toEqual([]);
  });

  it('a rule or a grant that decided gets one compact line and no buttons; its reason cannot format', () => {
    const denied = renderMessage(
      view({ status: 'rejected', decision: { by: 'policy:delete_workspace#0', at: new Date(), reason: 'blocked [here](https://evil.example)' } }),
    );
    expect(denied.components).toEqual([]);
    expect(denied.embeds[0]?.fields).toBeUndefined();
    expect(denied.embeds[0]?.description?.split('\n')[0]).toBe(
      '❌ `prp_AAAAAAAAAAAAAAAA` auto-denied by rule `policy:delete_workspace#0` (blocked \\[here\\]\\(https\\://evil.example\\)) for argus.',
    );
    const failed = renderMessage(view({ status: 'approved', error: 'boom', decision: { by: 'grant:grt_1', at: new Date(), reason: null } }));
    expect(failed.components).toEqual([]);
    expect(failed.embeds[0]?.description).toMatch(/auto-approved by grant `grt_1` for argus\.\n⚠️ \*\*Execution failed\*\*/);
    // A human's approval first, then a rule: the full message.
    const mixed = renderMessage(
      view({
        status: 'committed',
        approvals: [{ approver: 'discord:user:123456789012345678', at: new Date() }],
        decision: { by: 'policy:x#0', at: new Date(), reason: null },
      }),
    );
    expect(mixed.embeds[0]?.fields?.length).toBeGreaterThan(0);
  });

  it('a reminder pings only the configured Discord users and roles, never what the agent wrote', () => {
    const body = renderFollowUp(
      view({ agent: 'argus <@999999999999999999> @everyone', quorum: 2, consoleUrl: 'https://twokey.example/console/proposals/prp_AAAAAAAAAAAAAAAA' }),
      {
        kind: 'remind',
        mention: ['discord:user:123456789012345678', 'discord:role:223456789012345678', 'slack:U0ALICE'],
      },
    );
    expect(body.allowed_mentions).toEqual({ parse: [], users: ['123456789012345678'], roles: ['223456789012345678'] });
    expect(body.content).toBe(
      '🔔 Reminder <@123456789012345678> <@&223456789012345678> slack\\:U0ALICE: **delete\\_workspace** (`prp_AAAAAAAAAAAAAAAA`) by argus \\<\\@999999999999999999\\> \\@everyone still waits for 2 approvals; it expires <t:1795341900:R> and then does not run. [Open it](<https://twokey.example/console/proposals/prp_AAAAAAAAAAAAAAAA>)',
    );
    const escalation = renderFollowUp(view(), { kind: 'escalate', mention: [] });
    expect(escalation.content).toMatch(/^🚨 Escalated to the approvers, who may now decide: /);
    expect(renderFollowUp(view({ operation: 'x'.repeat(5000) }), { kind: 'remind', mention: [] }).content.length).toBeLessThanOrEqual(2000);
  });
});
