import { describe, expect, it } from 'vitest';
import { approvalCard, CARD_WORDS, type CardWords } from '../../src/chat/card.js';
import type { ProposalMessageView } from '../../src/chat/types.js';
import { cardToEmail } from '../../src/email/message.js';

const now = new Date('2026-11-22T10:00:00.000Z');
const links = { approve: 'https://twokey.example/email/approve/prp_MAIL/tk', reject: 'https://twokey.example/email/reject/prp_MAIL/tk' };

const view = (overrides: Partial<ProposalMessageView> = {}): ProposalMessageView => ({
  id: 'prp_MAIL',
  operation: 'refund',
  description: 'Refund a customer',
  summary: 'argus wants to refund $12.00 to acme.',
  agent: 'argus',
  confirmationType: 'payment',
  cost: '$12.00',
  expiresAt: new Date('2026-11-22T10:05:00.000Z'),
  status: 'pending',
  quorum: 2,
  approvals: [{ approver: 'email:alice@example.com', at: now }],
  decision: null,
  result: null,
  error: null,
  grantDurationsMs: [3_600_000],
  consoleUrl: 'https://twokey.example/console/proposals/prp_MAIL',
  trail: [],
  ...overrides,
});

describe('the approval card as a mail', () => {
  it('labels its links with the card’s words, in the text body and the HTML body alike', () => {
    const words: CardWords = {
      ...CARD_WORDS,
      actions: { ...CARD_WORDS.actions, approve: 'Allow it', reject: 'Refuse it' },
      fields: { ...CARD_WORDS.fields, agent: 'Requested by' },
    };
    const mail = cardToEmail(approvalCard(view(), { words }), links);
    expect(mail.text).toContain(`Allow it: ${links.approve}`);
    expect(mail.text).toContain(`Refuse it: ${links.reject}`);
    expect(mail.text).toContain('Requested by: argus');
    expect(mail.html).toContain(`href="${links.approve}"`);
    expect(mail.html).toContain('>Allow it</a>');
    expect(mail.html).toContain('>Refuse it</a>');
    expect(mail.text).not.toContain('Approve');
  });

  it('offers no decision links once the proposal is decided, only the console', () => {
    const mail = cardToEmail(approvalCard(view({ status: 'committed', decision: { by: 'email:alice@example.com', at: now, reason: null } })), links);
    expect(mail.html).not.toContain('/email/approve/');
    expect(mail.text).not.toContain('/email/reject/');
    expect(mail.text).toContain('Open proposal prp_MAIL in the twokey console: https://twokey.example/console/proposals/prp_MAIL');
  });

  it('escapes what an agent chose in the HTML body and keeps the subject on one line', () => {
    const mail = cardToEmail(approvalCard(view({ summary: 'argus <b>wants</b>\r\nBcc: everyone@example.com' })), links);
    expect(mail.html).toContain('argus &lt;b&gt;wants&lt;/b&gt;');
    expect(mail.html).not.toContain('<b>wants');
    expect(mail.subject).not.toMatch(/[\r\n]/);
    expect(mail.subject).toBe('refund (Pending): argus <b>wants</b> Bcc: everyone@example.com');
  });

  it('cuts a long subject and says so', () => {
    const mail = cardToEmail(approvalCard(view({ summary: 'x'.repeat(500) })), links);
    expect(mail.subject.length).toBe(160);
    expect(mail.subject.endsWith('…')).toBe(true);
  });
});
