import type { ApprovalCard, CardActionId, CardInline, CardText, CardTone, FollowUpCard } from '../chat/card.js';
import { html, type SafeHtml } from '../console/html.js';
import { TONE_SYMBOLS } from '../chat/card-words.js';

/** One mail about a proposal: the same words in plain text and in HTML. */
export interface EmailMessage {
  subject: string;
  text: string;
  html: string;
}

/**
 * Where the card's actions lead for one recipient: the confirm pages of their own links. Without
 * them (a reply telling the outcome, or a card already decided) no Approve or Reject is shown.
 */
export interface EmailLinks {
  approve?: string;
  reject?: string;
}

// A subject is one line; long ones are folded or cut by mail clients, so twokey cuts first and says so.
const SUBJECT_MAX = 160;

const TONE_COLOUR: Record<CardTone, string> = {
  pending: '#b7791f',
  approved: '#2b6cb0',
  executing: '#2b6cb0',
  committed: '#2f855a',
  rejected: '#c53030',
  expired: '#718096',
  cancelled: '#718096',
  failed: '#c05621',
};

const BUTTON_COLOUR: Record<'primary' | 'danger' | 'default', string> = { primary: '#2f855a', danger: '#c53030', default: '#4a5568' };

/** Line breaks and control characters in agent-chosen text would start new header lines or hide text. */
const oneLine = (text: string): string =>
  [...text]
    .map((char) => (/\s/.test(char) || char.charCodeAt(0) < 0x20 || char.charCodeAt(0) === 0x7f ? ' ' : char))
    .join('')
    .replace(/ +/g, ' ')
    .trim();

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function inlineText(piece: CardInline): string {
  switch (piece.type) {
    case 'text':
    case 'strong':
    case 'value':
    case 'verbatim':
    case 'code':
      return piece.text;
    case 'identity':
      return piece.identity;
    case 'time':
      return `${piece.at.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
    case 'link':
      return `${piece.text} (${piece.url})`;
  }
}

const plain = (text: CardText): string => text.map(inlineText).join('');

function inlineHtml(piece: CardInline): SafeHtml {
  switch (piece.type) {
    case 'text':
    case 'value':
      return html`${piece.text}`;
    case 'strong':
      return html`<strong>${piece.text}</strong>`;
    case 'verbatim':
    case 'code':
      return html`<code style="font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px">${piece.text}</code>`;
    case 'identity':
      return html`${piece.identity}`;
    case 'time':
      return html`${inlineText(piece)}`;
    case 'link':
      return html`<a href="${piece.url}">${piece.text}</a>`;
  }
}

const rich = (text: CardText): SafeHtml => html`${text.map(inlineHtml)}`;

/** The action ids that become links in a mail; "Approve for…" and Retry need the console's forms. */
const LINKED: ReadonlySet<CardActionId> = new Set(['approve', 'reject']);

/**
 * The approval card (src/chat/card.ts) as a mail: a subject, a plain-text body and an HTML body,
 * every word the card's. The converter adds only mail mechanics: one-line subjects, HTML escaping,
 * inline styles (mail clients drop style sheets), and the recipient's own links for Approve and Reject.
 * An action the mail cannot carry (Approve for…, Retry) is left to the console's link.
 */
export function cardToEmail(card: ApprovalCard, links: EmailLinks = {}): EmailMessage {
  const subject = cut(oneLine(card.notification), SUBJECT_MAX);
  const actions = card.actions.flatMap((action) => {
    if (action.id === 'open' && action.url) return [{ ...action, url: action.url }];
    const url = LINKED.has(action.id) ? links[action.id as 'approve' | 'reject'] : undefined;
    return url ? [{ ...action, url }] : [];
  });

  const textLines = [
    `${card.title} — ${card.subtitle}`,
    '',
    card.summary,
    '',
    ...card.status.map((line) => `${line.tone ? `${TONE_SYMBOLS[line.tone]} ` : ''}${plain(line.text)}`),
    '',
    ...card.fields.map((field) => `${field.label}: ${plain(field.value)}`),
    ...(actions.length > 0 ? ['', ...actions.map((action) => `${action.label}: ${action.url}`)] : []),
    '',
  ];

  const colour = TONE_COLOUR[card.tone];
  const body = html`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${subject}</title>
  </head>
  <body style="margin:0;padding:24px;background:#f4f5f7;font-family:-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;color:#1a202c">
    <table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="max-width:600px;margin:0 auto;background:#ffffff;border-radius:8px;border-top:4px solid ${colour}">
      <tr>
        <td style="padding:20px 24px">
          <p style="margin:0 0 8px;font-size:13px;color:${colour};font-weight:600">
            <span aria-hidden="true">${TONE_SYMBOLS[card.tone]}</span> ${card.state} · ${card.title}
          </p>
          <p style="margin:0 0 4px;font-size:13px;color:#4a5568">${card.labels.subtitle}: ${card.subtitle}</p>
          <h1 style="margin:12px 0 16px;font-size:18px;line-height:1.4">${card.summary}</h1>
          ${card.status.map(
            (line) =>
              html`<p style="margin:0 0 8px;font-size:14px">${line.tone ? html`<span aria-hidden="true">${TONE_SYMBOLS[line.tone]}</span> ` : ''}${rich(line.text)}</p>`,
          )}
          <table role="presentation" cellpadding="0" cellspacing="0" style="margin:12px 0;font-size:14px">
            ${card.fields.map(
              (field) =>
                html`<tr>
                  <td style="padding:2px 16px 2px 0;color:#4a5568;vertical-align:top">${field.label}</td>
                  <td style="padding:2px 0">${rich(field.value)}</td>
                </tr>`,
            )}
          </table>
          ${
            actions.length > 0
              ? html`<p style="margin:20px 0 0">
                  ${actions.map(
                    (action) =>
                      html`<a href="${action.url}" style="display:inline-block;margin:0 8px 8px 0;padding:10px 18px;border-radius:6px;background:${
                        BUTTON_COLOUR[action.style]
                      };color:#ffffff;text-decoration:none;font-weight:600;font-size:14px">${action.label}</a>`,
                  )}
                </p>`
              : ''
          }
        </td>
      </tr>
    </table>
  </body>
</html>`;

  return { subject, text: textLines.join('\n'), html: body.value };
}

/**
 * A reminder or an escalation (`followUpCard`) as the body of a reply in the proposal's thread: the
 * card's one line, in text and HTML. The request it replies to still holds the recipient's links.
 */
export function followUpToEmail(card: FollowUpCard): Pick<EmailMessage, 'text' | 'html'> {
  const body = html`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
  </head>
  <body style="margin:0;padding:24px;font-family:-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;color:#1a202c">
    <p style="margin:0;font-size:14px;line-height:1.5">${rich(card.text)}</p>
  </body>
</html>`;
  return { text: `${plain(card.text)}\n`, html: body.value };
}
