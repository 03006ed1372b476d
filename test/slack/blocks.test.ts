import { describe, expect, it } from 'vitest';
import type { ProposalMessageView } from '../../src/chat/types.js';
import { compileSummaryTemplate } from '../../src/config/summary-template.js';
import { renderProposalMessage, renderTrail } from '../../src/slack/blocks.js';

function view(overrides: Partial<ProposalMessageView> = {}): ProposalMessageView {
  return {
    id: 'prp_blocks',
    operation: 'upgrade_plan',
    description: "Change an organisation's billing plan",
    summary: 'bot is requesting to upgrade <!channel> <https://evil.example|acme> to the pro plan.',
    agent: 'bot<script>',
    confirmationType: 'payment',
    cost: '$49.00',
    expiresAt: new Date('2026-11-22T10:05:00Z'),
    status: 'pending',
    quorum: 2,
    approvals: [{ approver: 'slack:U0ALICE', at: new Date('2026-11-22T10:01:00Z') }],
    decision: null,
    result: null,
    error: null,
    consoleUrl: null,
    trail: [],
    ...overrides,
  };
}

const mrkdwnTexts = (blocks: unknown[]) =>
  JSON.stringify(blocks)
    .match(/"type":"mrkdwn","text":"(?:[^"\\]|\\.)*"/g)
    ?.join('\n') ?? '';

describe('Slack proposal message', () => {
  it('cannot be made to mention or link by what the agent sent', () => {
    const message = renderProposalMessage(view());
    const summary = message.blocks.find((b) => b.type === 'section' && 'text' in b && b.text?.type === 'plain_text');
    expect(summary).toBeDefined();
    expect(mrkdwnTexts(message.blocks)).not.toMatch(/<!channel>|<https:\/\/evil|<script>/);
    expect(mrkdwnTexts(message.blocks)).toContain('bot&lt;script&gt;');
    expect(message.text).toContain('&lt;!channel&gt;');
  });

  it('says "Committed" and shows a result only when the operation chose one', () => {
    const committed = (result: string | null) => mrkdwnTexts(renderProposalMessage(view({ status: 'committed', result })).blocks);
    expect(committed(null)).toContain(':white_check_mark: *Committed*"');
    expect(committed('refunded as re_1001')).toContain(':white_check_mark: *Committed*: refunded as re_1001"');
  });

  it("shows the expiry in each reader's time zone, with a fallback", () => {
    expect(JSON.stringify(renderProposalMessage(view()).blocks)).toContain('<!date^1795341900^{date_short_pretty} {time}|2026-11-22 10:05 UTC>');
  });

  it('asks for confirmation before approving a payment only', () => {
    const approve = (v: ProposalMessageView) => JSON.stringify(renderProposalMessage(v).blocks).includes('"confirm":');
    expect(approve(view())).toBe(true);
    expect(approve(view({ confirmationType: 'approval' }))).toBe(false);
  });

  it('keeps within Block Kit limits for a huge summary', () => {
    const message = renderProposalMessage(view({ summary: 'x'.repeat(10_000), error: 'e'.repeat(5_000), status: 'approved' }));
    for (const block of message.blocks) {
      if ('text' in block && block.text && typeof block.text === 'object' && 'text' in block.text) expect(block.text.text.length).toBeLessThanOrEqual(3000);
    }
    expect(message.text.length).toBeLessThanOrEqual(3000);
  });

  it('keeps the newest lines of a long trail', () => {
    const trail = Array.from({ length: 200 }, (_, i) => `2026-11-22T10:00:00.000Z event.${i} by slack:U0ALICE`);
    const text = renderTrail(view({ trail }));
    expect(text.length).toBeLessThanOrEqual(3000);
    expect(text).toContain('event.199');
    expect(text).not.toContain('event.0 ');
  });
});

describe('Slack: a param cannot forge lines, reorder text or pass for another script', () => {
  const summaryOf = (org: string) =>
    compileSummaryTemplate('{{ agent }} wants to pay {{ params.org }}.', { type: 'object', properties: { org: { type: 'string' } } })({
      agent: 'bot',
      operation: 'upgrade_plan',
      params: { org },
    });

  it('in the summary section, the notification text and the payment confirmation', () => {
    const forged = 'invoice 42\n\nCost: $1.00 (one dollar)\nApproved by security team ✅ \u202Eexe.\u200B\u0410cme';
    const message = renderProposalMessage(view({ summary: summaryOf(forged) }));
    const section = message.blocks.find((b) => b.type === 'section' && 'text' in b && b.text?.type === 'plain_text');
    const actions = message.blocks.find((b) => b.type === 'actions');
    const confirm = JSON.parse(JSON.stringify(actions)).elements[0].confirm;
    for (const text of [(section as { text: { text: string } }).text.text, message.text, confirm.text.text as string]) {
      expect(text).not.toMatch(/[\n\r\u202E\u200B]/);
      expect(text).toContain('invoice 42⏎⏎Cost: $1.00 (one dollar)⏎Approved by security team ✅ [U+202E]exe.[U+200B]');
    }
    expect((section as { text: { text: string } }).text.text).toContain('[⚠ mixed scripts: Cyrillic + Latin]');
    expect(confirm.text.type).toBe('plain_text');
  });
});
