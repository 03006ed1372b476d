import { describe, expect, it } from 'vitest';
import type { ProposalMessageView } from '../../src/chat/types.js';
import { renderMessage } from '../../src/discord/message.js';

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
    expect(description).toBe(
      'argus wants to delete \\[acme\\]\\(https\\://evil.example\\) \\<\\@123456789012345678\\> \\@everyone \\*\\*now\\*\\*',
    );
    expect(message.allowed_mentions).toEqual({ parse: [] });
  });

  it('stays within Discord\'s embed limits whatever the proposal holds', () => {
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
      return { status: message.embeds[0]?.fields?.[0]?.value, buttons: message.components.flatMap((row) => row.components.map((c) => ('custom_id' in c ? c.custom_id : ''))) };
    };
    const by = { by: 'discord:user:123456789012345678', at: new Date(), reason: null };
    expect(statusOf({})).toEqual({ status: expect.stringMatching(/Pending/), buttons: ['twokey:approve:prp_AAAAAAAAAAAAAAAA', 'twokey:reject:prp_AAAAAAAAAAAAAAAA'] });
    expect(statusOf({ status: 'approved', decision: by })).toEqual({ status: expect.stringMatching(/Approved.*<@123456789012345678>/), buttons: [] });
    expect(statusOf({ status: 'approved', error: 'boom `x`' })).toEqual({ status: expect.stringMatching(/Execution failed.*`boom ˋxˋ`/s), buttons: ['twokey:retry:prp_AAAAAAAAAAAAAAAA'] });
    expect(statusOf({ status: 'executing' }).status).toMatch(/Executing/);
    expect(statusOf({ status: 'committed', result: { id: 7 } })).toEqual({ status: '✅ **Committed**: `{"id":7}`', buttons: [] });
    expect(statusOf({ status: 'rejected', decision: { ...by, reason: 'not *now*' } }).status).toBe('❌ **Rejected** by <@123456789012345678>: not \\*now\\*');
    expect(statusOf({ status: 'rejected', decision: by }).status).toMatch(/no reason given/);
    expect(statusOf({ status: 'expired' }).status).toMatch(/Expired/);
    expect(statusOf({ status: 'cancelled' }).status).toMatch(/Cancelled/);
  });
});
