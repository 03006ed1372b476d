import { describe, expect, it } from 'vitest';
import { approvalCard } from '../../src/chat/card.js';
import type { ProposalMessageView } from '../../src/chat/types.js';
import { cardToAdaptiveCard, parseVerb, renderActivity } from '../../src/teams/adaptive-card.js';
import { executeActions } from './helpers.js';

const now = new Date('2026-11-22T10:00:00.000Z');

const view = (overrides: Partial<ProposalMessageView> = {}): ProposalMessageView => ({
  id: 'prp_TEAMSTEAMSTEAMS',
  operation: 'refund',
  description: 'Refund a customer',
  summary: 'argus wants to refund $12.00 to acme.',
  agent: 'argus',
  confirmationType: 'approval',
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

describe('the approval card as an Adaptive Card', () => {
  it('a payment asks first: Approve opens a card with the question, the summary and the button that acts', () => {
    const card = cardToAdaptiveCard(approvalCard(view({ confirmationType: 'payment' })));
    const approve = (card.actions as any[])[0];
    expect(approve).toMatchObject({ type: 'Action.ShowCard', title: 'Approve' });
    expect(JSON.stringify(approve.card.body)).toContain('Approve this payment?');
    expect(JSON.stringify(approve.card.body)).toContain('argus wants to refund $12.00 to acme.');
    expect(approve.card.actions).toEqual([
      expect.objectContaining({ type: 'Action.Execute', verb: 'twokey.approve', data: { proposalId: 'prp_TEAMSTEAMSTEAMS' } }),
    ]);
  });

  it('a decision by a rule is compact, with nothing to press; a failure offers Retry', () => {
    const automatic = cardToAdaptiveCard(approvalCard(view({ status: 'committed', decision: { by: 'policy:refund#0', at: now, reason: null } })));
    expect(automatic.actions).toEqual([]);
    expect(JSON.stringify(automatic)).toContain('auto-approved');
    const failed = cardToAdaptiveCard(approvalCard(view({ status: 'approved', error: 'timeout', decision: { by: 'teams:x', at: now, reason: null } })));
    expect(executeActions(failed).map((action) => action.verb)).toEqual(['twokey.retry']);
  });

  it('a long summary is cut within the card, its look-alike warning kept; the message carries a one-line preview', () => {
    const summary = `${'x'.repeat(5_000)} [⚠ mixed scripts: Cyrillic + Latin]`;
    const activity = renderActivity(view({ summary })) as any;
    const text = JSON.stringify(activity.attachments[0].content);
    expect(text.length).toBeLessThan(10_000);
    expect(text).toContain('… [⚠ mixed scripts: Cyrillic + Latin]');
    expect(activity.summary.length).toBeLessThanOrEqual(200);
  });

  it("reads back only twokey's own verbs", () => {
    expect(parseVerb('twokey.reject')).toBe('reject');
    expect(['twokey.delete', 'approve', 42, undefined].map(parseVerb)).toEqual([null, null, null, null]);
  });
});
