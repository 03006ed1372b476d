import { describe, expect, it } from 'vitest';
import { approvalCard, CARD_WORDS, fitSummary, followUpCard, type ApprovalCard, type CardWords, type FollowUpCard } from '../../src/chat/card.js';
import type { ProposalMessageView } from '../../src/chat/types.js';
import { compileSummaryTemplate } from '../../src/config/summary-template.js';
import { cardToHtml } from '../../src/console/views/card-html.js';
import { cardToDiscord, followUpToDiscord } from '../../src/discord/message.js';
import { cardToEmail, followUpToEmail } from '../../src/email/message.js';
import { cardToBlockKit, followUpToSlack } from '../../src/slack/blocks.js';
import { cardToAdaptiveCard, followUpToTeams } from '../../src/teams/adaptive-card.js';

const now = new Date('2026-11-22T10:00:00.000Z');

const view = (overrides: Partial<ProposalMessageView> = {}): ProposalMessageView => ({
  id: 'prp_CARDCARDCARDCARD',
  operation: 'refund',
  description: 'Refund a customer',
  summary: 'argus wants to refund $12.00 to acme.',
  agent: 'argus',
  confirmationType: 'payment',
  cost: '$12.00',
  expiresAt: new Date('2026-11-22T10:05:00.000Z'),
  status: 'pending',
  quorum: 2,
  approvals: [{ approver: 'web:operator', at: now }],
  decision: null,
  result: null,
  error: null,
  grantDurationsMs: [3_600_000],
  consoleUrl: 'https://twokey.example/console/proposals/prp_CARDCARDCARDCARD',
  trail: [],
  ...overrides,
});

/**
 * Every place an approval card is shown. A new channel (Teams' Adaptive Cards, email's text and
 * HTML) joins by adding its converter here; every test below then holds it to the same words.
 */
const converters: Array<{
  name: string;
  render(card: ApprovalCard): string;
  showsActions: boolean;
  /** Teams: text a person or an agent chose goes in a TextRun, which renders no markup at all, so it stays as written. */
  plainRuns?: boolean;
}> = [
  { name: 'Slack', render: (card) => JSON.stringify(cardToBlockKit(card)), showsActions: true },
  { name: 'Discord', render: (card) => JSON.stringify(cardToDiscord(card)), showsActions: true },
  { name: 'Teams', render: (card) => JSON.stringify(cardToAdaptiveCard(card)), showsActions: true, plainRuns: true },
  // The console's buttons are forms of the signed-in viewer (console tests cover them); the card body is the converter.
  { name: 'console', render: (card) => cardToHtml(card, now).value, showsActions: false },
  // A mail's subject and HTML body (its plain-text body is plain text: nothing in it formats, so
  // nothing is escaped; test/email/message.test.ts holds it to the same words). Its buttons are links.
  {
    name: 'email',
    render: (card) => {
      const mail = cardToEmail(card, { approve: 'https://twokey.example/email/approve/p/t', reject: 'https://twokey.example/email/reject/p/t' });
      return `${mail.subject}\n${mail.html}`;
    },
    showsActions: false,
  },
];

const followUpConverters: Array<{ name: string; render(card: FollowUpCard): string }> = [
  { name: 'Slack', render: followUpToSlack },
  { name: 'Discord', render: (card) => followUpToDiscord(card).content },
  // What a reader sees: the follow-up's runs, one after the other.
  { name: 'Teams', render: (card) => (followUpToTeams(card).body as Array<{ inlines: Array<{ text: string }> }>)[0]!.inlines.map((run) => run.text).join('') },
  { name: 'email', render: (card) => followUpToEmail(card).text },
];

describe('one approval card, worded once, rendered by every channel', () => {
  // Words without punctuation: Discord escapes punctuation in what it stresses (`sign\-off`), which reads the same.
  const changed: CardWords = {
    ...CARD_WORDS,
    states: { ...CARD_WORDS.states, pending: 'Awaiting signature', committed: 'Done and dusted' },
    fields: { ...CARD_WORDS.fields, agent: 'Requested by' },
    approvalsCount: (count, quorum) => `${count} out of ${quorum}`,
    actions: { ...CARD_WORDS.actions, approve: 'Allow it' },
    followUp: { ...CARD_WORDS.followUp, reminder: 'Gentle nudge' },
  };

  it.each(converters)('$name shows a state renamed in the card, and the old name nowhere', ({ render }) => {
    const before = render(approvalCard(view()));
    expect(before).toContain('Pending');
    const after = render(approvalCard(view(), { words: changed }));
    expect(after).toContain('Awaiting signature');
    expect(after).not.toContain('Pending');
    expect(render(approvalCard(view({ status: 'committed' }), { words: changed }))).toContain('Done and dusted');
  });

  it.each(converters)('$name shows a field label and the "n of m" wording as the card words them', ({ render }) => {
    const after = render(approvalCard(view(), { words: changed }));
    expect(after).toContain('Requested by');
    expect(after).toContain('1 out of 2');
    expect(after).not.toContain('1 of 2');
  });

  it.each(converters.filter((converter) => converter.showsActions))('$name labels its buttons with the card’s words', ({ render }) => {
    expect(render(approvalCard(view(), { words: changed }))).toContain('"Allow it"');
  });

  it.each(followUpConverters)('$name words a reminder as the card does', ({ render }) => {
    const reminder = render(followUpCard(view(), { kind: 'remind', mention: [] }, changed));
    expect(reminder).toContain('Gentle nudge the approvers: ');
    expect(reminder).not.toContain('Reminder');
  });

  it('hands converters data only: agent-chosen text stays raw in the card, for each converter to escape', () => {
    const card = approvalCard(view({ agent: '<!channel> **argus**' }));
    expect(card.fields.find((field) => field.id === 'agent')?.value).toEqual([{ type: 'value', text: '<!channel> **argus**' }]);
    for (const { render, plainRuns } of converters) {
      if (plainRuns) expect(render(card)).toContain(JSON.stringify({ type: 'TextRun', text: '<!channel> **argus**' }));
      else expect(render(card)).not.toContain('<!channel> **argus**');
    }
  });

  it('keeps the action ids every channel turns into its own', () => {
    expect(approvalCard(view()).actions.map((action) => action.id)).toEqual(['approve', 'grant', 'reject', 'open']);
    expect(approvalCard(view({ status: 'approved', error: 'boom' })).actions.map((action) => action.id)).toEqual(['retry', 'open']);
    expect(approvalCard(view({ status: 'committed' })).actions.map((action) => action.id)).toEqual(['open']);
    // A rule's decision is one compact line, with nothing to press.
    const automatic = approvalCard(view({ status: 'committed', approvals: [], decision: { by: 'policy:refund#0', at: now, reason: null } }));
    expect(automatic).toMatchObject({ layout: 'compact', fields: [] });
    expect(automatic.actions.map((action) => action.id)).toEqual(['open']);
  });
});

describe('a summary cut to fit a channel keeps its warnings', () => {
  // The warned-of value comes last, after a long one: a plain cut would drop its warning.
  const summary = compileSummaryTemplate('{{ params.memo }}: {{ agent }} wants to pay {{ params.org }}', {
    type: 'object',
    properties: { org: { type: 'string' }, memo: { type: 'string' } },
  })({ agent: 'bot', operation: 'pay', params: { org: '\u0410cme', memo: 'x'.repeat(5000) } });

  it('lists what display-safe rendering warned of, and puts it back after a cut', () => {
    const card = approvalCard(view({ summary }));
    expect(card.warnings).toEqual(['mixed scripts: Cyrillic + Latin']);
    const fitted = fitSummary(card, 300);
    expect(fitted.length).toBeLessThanOrEqual(300);
    expect(fitted).toMatch(/^x+… \[⚠ mixed scripts: Cyrillic \+ Latin\]$/);
    // Slack's payment confirmation holds 300 characters: the warning is still in it.
    expect(JSON.stringify(cardToBlockKit(card))).toContain('x… [⚠ mixed scripts: Cyrillic + Latin]","emoji":false},"confirm"');
  });
});
