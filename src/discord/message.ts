import {
  ButtonStyle,
  ComponentType,
  type APIActionRowComponent,
  type APIComponentInMessageActionRow,
  type APIEmbed,
  type APIEmbedField,
  type APIAllowedMentions,
} from 'discord.js';
import {
  approvalCard,
  fitSummary,
  followUpCard,
  type ApprovalCard,
  type CardActionId,
  type CardLine,
  type CardText,
  type CardTone,
  type FollowUpCard,
} from '../chat/card.js';
import type { ProposalMessageView } from '../chat/types.js';

/**
 * The buttons twokey puts on a message (`grant` is "Approve for…"); the proposal id rides in the
 * custom_id, never the token. The modals they open carry the same custom_id back.
 */
export type DiscordAction = 'approve' | 'reject' | 'retry' | 'grant';

export const customIdFor = (action: DiscordAction, proposalId: string): string => `twokey:${action}:${proposalId}`;

const CUSTOM_ID = /^twokey:(approve|reject|retry|grant):([A-Za-z0-9_-]{1,80})$/;

export function parseCustomId(customId: string): { action: DiscordAction; proposalId: string } | null {
  const match = CUSTOM_ID.exec(customId);
  if (!match?.[1] || !match[2]) return null;
  return { action: match[1] as DiscordAction, proposalId: match[2] };
}

// Discord's embed limits: going over any of them turns the message into a 400 that no retry can fix.
const LIMIT = { title: 256, description: 4096, fieldValue: 1024, footer: 256, short: 256, embed: 6000, fields: 25 } as const;

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * The summary quotes agent-chosen params, so an agent could otherwise write markdown: a masked link
 * that reads "example.com" but points elsewhere, a fake `<@id>` mention, or formatting that hides
 * part of the text. Discord renders `\` + any punctuation as the bare character, so escaping every
 * punctuation mark shows the text exactly as written.
 */
export function escapeDiscordMarkdown(text: string): string {
  return text.replace(/[\\`*_~|>#[\]()<@:!-]/g, '\\$&');
}

/** `discord:user:1` → a mention (rendered as the name, never a ping inside an embed); anything else as text. */
export function renderIdentity(identity: string): string {
  const user = /^discord:user:(\d{17,20})$/.exec(identity);
  if (user) return `<@${user[1]}>`;
  const role = /^discord:role:(\d{17,20})$/.exec(identity);
  if (role) return `<@&${role[1]}>`;
  return escapeDiscordMarkdown(identity);
}

const COLOUR: Record<CardTone, number> = {
  pending: 0xf1c40f,
  approved: 0x3498db,
  executing: 0x3498db,
  failed: 0xe67e22,
  committed: 0x2ecc71,
  rejected: 0xe74c3c,
  expired: 0x95a5a6,
  cancelled: 0x95a5a6,
};

/** Each tone's symbol: the state never relies on the embed's colour alone. */
const TONE_EMOJI: Record<CardTone, string> = {
  pending: '⏳',
  approved: '✅',
  executing: '⚙️',
  committed: '✅',
  rejected: '❌',
  expired: '⌛',
  cancelled: '🚫',
  failed: '⚠️',
};

const unix = (date: Date): number => Math.floor(date.getTime() / 1000);

const oneLine = (text: string): string => text.replace(/\s+/g, ' ').trim();

/**
 * Results and errors are machine text (JSON, an executor's message): shown verbatim in a code span,
 * where Discord renders no markdown. A code span cannot hold a backtick, so those are swapped.
 */
const codeSpan = (value: string, max: number): string => `\`${truncate(oneLine(value).replace(/`/g, 'ˋ'), max) || ' '}\``;

/** A decider or an id inside a code span, where Discord renders no markdown (a span cannot hold a backtick). */
const codeText = (text: string): string => `\`${text.replace(/`/g, 'ˋ')}\``;

/** A card's line as Discord markdown: twokey's words as they are, everything else escaped or in a code span. */
export function discordText(text: CardText): string {
  return text
    .map((piece) => {
      switch (piece.type) {
        case 'text':
          return piece.text;
        case 'strong':
          return `**${escapeDiscordMarkdown(piece.text)}**`;
        case 'value':
          return escapeDiscordMarkdown(truncate(oneLine(piece.text), 600));
        case 'verbatim':
          return codeSpan(piece.text, 600);
        case 'code':
          return codeText(piece.text);
        case 'identity':
          return renderIdentity(piece.identity);
        case 'time':
          return `<t:${unix(piece.at)}:${piece.style === 'relative' ? 'R' : 'f'}>`;
        case 'link':
          // Angle brackets: a link without a preview card.
          return `[${escapeDiscordMarkdown(piece.text)}](<${piece.url}>)`;
      }
    })
    .join('');
}

const lineText = (line: CardLine): string => `${line.tone ? `${TONE_EMOJI[line.tone]} ` : ''}${discordText(line.text)}`;

/** Discord's look of each card action; `open` is the embed's title link instead. */
const BUTTON_STYLE: Partial<Record<CardActionId, ButtonStyle.Success | ButtonStyle.Primary | ButtonStyle.Danger>> = {
  approve: ButtonStyle.Success,
  grant: ButtonStyle.Primary,
  reject: ButtonStyle.Danger,
  retry: ButtonStyle.Primary,
};

function buttonsFor(card: ApprovalCard): APIActionRowComponent<APIComponentInMessageActionRow>[] {
  const buttons = card.actions.flatMap((action) => {
    const style = BUTTON_STYLE[action.id];
    if (!style || action.id === 'open') return [];
    return [{ type: ComponentType.Button as const, style, label: truncate(action.label, 80), custom_id: customIdFor(action.id, card.proposalId) }];
  });
  // Final or in flight: nothing left to press. An empty array removes earlier buttons on edit.
  return buttons.length === 0 ? [] : [{ type: ComponentType.ActionRow, components: buttons }];
}

const openUrl = (card: ApprovalCard): string | undefined => card.actions.find((action) => action.id === 'open')?.url;

export function renderEmbed(view: ProposalMessageView): APIEmbed {
  return cardToEmbed(approvalCard(view));
}

/** The card as an embed: the status first, then the card's fields inline, within Discord's limits. */
export function cardToEmbed(card: ApprovalCard): APIEmbed {
  const fields: APIEmbedField[] = [
    { name: card.labels.status, value: truncate(card.status.map(lineText).join('\n'), LIMIT.fieldValue) },
    ...card.fields.slice(0, LIMIT.fields - 1).map((field) => ({
      name: truncate(field.label, LIMIT.short),
      value: truncate(discordText(field.value), field.id === 'approvals' ? LIMIT.fieldValue : LIMIT.short),
      inline: true,
    })),
  ];
  const title = truncate(card.title, LIMIT.title);
  const footer = truncate(card.subtitle, LIMIT.footer);
  // The summary gets what the rest leaves of the 6000 characters the whole embed may hold.
  const used = title.length + footer.length + fields.reduce((sum, field) => sum + field.name.length + field.value.length, 0);
  const embed: APIEmbed = {
    title,
    description: fitSummary(card, Math.min(LIMIT.description, LIMIT.embed - used), escapeDiscordMarkdown),
    color: COLOUR[card.tone],
    fields,
    footer: { text: footer },
  };
  const url = openUrl(card);
  if (url) embed.url = url;
  return embed;
}

/** What a post and an edit send (valid as both bodies). */
export interface DiscordMessageBody {
  embeds: APIEmbed[];
  components: APIActionRowComponent<APIComponentInMessageActionRow>[];
  allowed_mentions: APIAllowedMentions;
}

/** The whole message body; the same for the first post and every edit, so an edit replaces everything. */
export function renderMessage(view: ProposalMessageView): DiscordMessageBody {
  return cardToDiscord(approvalCard(view));
}

export function cardToDiscord(card: ApprovalCard): DiscordMessageBody {
  return {
    embeds: [card.layout === 'compact' ? compactEmbed(card) : cardToEmbed(card)],
    components: buttonsFor(card),
    // Mentions in the embed render names; this makes sure nothing in the message ever pings anyone.
    allowed_mentions: { parse: [] },
  };
}

/** A decision no human made: its line, the outcome as it changes, then the summary; never fields. */
function compactEmbed(card: ApprovalCard): APIEmbed {
  const lines = card.status.map(lineText).join('\n');
  const description = truncate(`${lines}\n${escapeDiscordMarkdown(card.summary)}`, LIMIT.description);
  const embed: APIEmbed = { title: truncate(card.title, LIMIT.title), description, color: COLOUR[card.tone] };
  const url = openUrl(card);
  if (url) embed.url = url;
  return embed;
}

/** Discord's limit on a message's text. */
const CONTENT_LIMIT = 2000;

/** A reminder or an escalation: the text, and exactly the users and roles it may ping. */
export interface FollowUpBody {
  content: string;
  allowed_mentions: APIAllowedMentions;
}

/**
 * Who is asked, what waits, until when. Unlike the proposal message this one pings, but only the
 * Discord users and roles named in the config: nothing the agent wrote can add a mention.
 */
export function renderFollowUp(view: ProposalMessageView, followUp: { kind: 'remind' | 'escalate'; mention: readonly string[] }): FollowUpBody {
  return followUpToDiscord(followUpCard(view, followUp));
}

export function followUpToDiscord(card: FollowUpCard): FollowUpBody {
  const users = card.mention.flatMap((identity) => /^discord:user:(\d{17,20})$/.exec(identity)?.[1] ?? []);
  const roles = card.mention.flatMap((identity) => /^discord:role:(\d{17,20})$/.exec(identity)?.[1] ?? []);
  const content = `${card.kind === 'remind' ? '🔔' : '🚨'} ${discordText(card.text)}`;
  // Discord accepts at most 100 ids of each kind.
  return { content: truncate(content, CONTENT_LIMIT), allowed_mentions: { parse: [], users: users.slice(0, 100), roles: roles.slice(0, 100) } };
}
