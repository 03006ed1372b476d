import {
  ButtonStyle,
  ComponentType,
  type APIActionRowComponent,
  type APIComponentInMessageActionRow,
  type APIEmbed,
  type APIEmbedField,
  type APIAllowedMentions,
} from 'discord.js';
import type { ProposalMessageView } from '../chat/types.js';
import { durationLabel } from '../lib/duration.js';
import { isAutomaticDecider } from '../core/model.js';
import { isFailedExecution } from '../core/outcome.js';

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
const LIMIT = { title: 256, description: 4096, fieldValue: 1024, footer: 256, short: 256, embed: 6000 } as const;

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

const COLOUR = {
  pending: 0xf1c40f,
  approved: 0x3498db,
  executing: 0x3498db,
  failed: 0xe67e22,
  committed: 0x2ecc71,
  rejected: 0xe74c3c,
  expired: 0x95a5a6,
  cancelled: 0x95a5a6,
} as const;

const unix = (date: Date): number => Math.floor(date.getTime() / 1000);

function oneLine(value: unknown): string {
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  return text.replace(/\s+/g, ' ').trim();
}

/**
 * Results and errors are machine text (JSON, an executor's message): shown verbatim in a code span,
 * where Discord renders no markdown. A code span cannot hold a backtick, so those are swapped.
 */
const codeSpan = (value: unknown, max: number): string => `\`${truncate(oneLine(value).replace(/`/g, 'ˋ'), max) || ' '}\``;

/** True after a failed execution: the proposal is back to approved, with the error kept. */
const hasFailed = (view: ProposalMessageView): boolean => isFailedExecution(view);

/**
 * The state in words, so the message never relies on its colour alone (colour-blind readers, screen
 * readers, notification previews).
 */
function statusLine(view: ProposalMessageView): string {
  const approvals = `${view.approvals.length} of ${view.quorum}`;
  const by = view.decision ? renderIdentity(view.decision.by) : 'unknown';
  switch (view.status) {
    case 'pending': {
      const reminded = view.reminders ? `; reminded ${view.reminders}×` : '';
      const escalated = view.escalatedAt ? `; escalated <t:${unix(view.escalatedAt)}:R>` : '';
      return `⏳ **Pending**: waiting for approval (${approvals})${reminded}${escalated}`;
    }
    case 'approved':
      return hasFailed(view)
        ? `⚠️ **Execution failed**: ${codeSpan(view.error, 600)}\nStill approved; press Retry to run it again.`
        : `✅ **Approved** by ${by}: waiting for execution`;
    case 'executing':
      return '⚙️ **Executing**';
    case 'committed':
      // The result only as the operation chose to show it (docs/discord.md); the whole of it is in the console.
      return view.result === null ? '✅ **Committed**' : `✅ **Committed**: ${codeSpan(view.result, 600)}`;
    case 'rejected': {
      const reason = view.decision?.reason ? `: ${escapeDiscordMarkdown(truncate(oneLine(view.decision.reason), 600))}` : ' (no reason given)';
      return `❌ **Rejected** by ${by}${reason}`;
    }
    case 'expired':
      return `⌛ **Expired**: nobody approved it in time (${approvals})`;
    case 'cancelled':
      return '🚫 **Cancelled** by the agent';
  }
}

function colourOf(view: ProposalMessageView): number {
  return hasFailed(view) ? COLOUR.failed : COLOUR[view.status];
}

function buttonsFor(view: ProposalMessageView): APIActionRowComponent<APIComponentInMessageActionRow>[] {
  if (view.status === 'pending') {
    return [
      {
        type: ComponentType.ActionRow,
        components: [
          { type: ComponentType.Button, style: ButtonStyle.Success, label: 'Approve', custom_id: customIdFor('approve', view.id) },
          // Only where the operation allows grants (chat sync leaves the durations empty otherwise).
          ...(view.grantDurationsMs && view.grantDurationsMs.length > 0
            ? [
                {
                  type: ComponentType.Button as const,
                  style: ButtonStyle.Primary as const,
                  label: `Approve for ${durationLabel(view.grantDurationsMs[0] ?? 0)}…`,
                  custom_id: customIdFor('grant', view.id),
                },
              ]
            : []),
          { type: ComponentType.Button, style: ButtonStyle.Danger, label: 'Reject', custom_id: customIdFor('reject', view.id) },
        ],
      },
    ];
  }
  if (hasFailed(view)) {
    return [
      {
        type: ComponentType.ActionRow,
        components: [{ type: ComponentType.Button, style: ButtonStyle.Primary, label: 'Retry', custom_id: customIdFor('retry', view.id) }],
      },
    ];
  }
  // Final or in flight: nothing left to press. An empty array removes earlier buttons on edit.
  return [];
}

export function renderEmbed(view: ProposalMessageView): APIEmbed {
  const approvers = view.approvals.map((a) => renderIdentity(a.approver)).join(', ');
  const fields: APIEmbedField[] = [
    { name: 'Status', value: truncate(statusLine(view), LIMIT.fieldValue) },
    { name: 'Agent', value: truncate(escapeDiscordMarkdown(view.agent), LIMIT.short), inline: true },
    { name: 'Confirmation type', value: view.confirmationType, inline: true },
  ];
  if (view.cost) fields.push({ name: 'Cost', value: truncate(escapeDiscordMarkdown(view.cost), LIMIT.short), inline: true });
  fields.push(
    view.status === 'pending'
      ? { name: 'Expires', value: `<t:${unix(view.expiresAt)}:R>`, inline: true }
      : { name: 'Expiry', value: `<t:${unix(view.expiresAt)}:f>`, inline: true },
    {
      name: 'Approvals',
      value: truncate(`${view.approvals.length} of ${view.quorum}${approvers ? `: ${approvers}` : ''}`, LIMIT.fieldValue),
      inline: true,
    },
    { name: 'Proposal', value: `\`${view.id}\``, inline: true },
  );
  const title = truncate(view.operation, LIMIT.title);
  const footer = truncate(view.description, LIMIT.footer);
  // The summary gets what the rest leaves of the 6000 characters the whole embed may hold.
  const used = title.length + footer.length + fields.reduce((sum, field) => sum + field.name.length + field.value.length, 0);
  const embed: APIEmbed = {
    title,
    description: truncate(escapeDiscordMarkdown(view.summary), Math.min(LIMIT.description, LIMIT.embed - used)),
    color: colourOf(view),
    fields,
    footer: { text: footer },
  };
  if (view.consoleUrl) embed.url = view.consoleUrl;
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
  if (view.decision && isAutomaticDecider(view.decision.by) && view.approvals.length === 0) return renderAutomaticDecision(view, view.decision);
  return {
    embeds: [renderEmbed(view)],
    components: buttonsFor(view),
    // Mentions in the embed render names; this makes sure nothing in the message ever pings anyone.
    allowed_mentions: { parse: [] },
  };
}

/** A decider or an id inside a code span, where Discord renders no markdown (a span cannot hold a backtick). */
const codeText = (text: string): string => `\`${text.replace(/`/g, 'ˋ')}\``;

/**
 * A decision no human made (a policy rule or a grant): one compact line, never buttons, saying which
 * rule or grant decided and why, then the outcome as it changes.
 */
function renderAutomaticDecision(view: ProposalMessageView, decision: NonNullable<ProposalMessageView['decision']>): DiscordMessageBody {
  const denied = view.status === 'rejected';
  const by = decision.by.startsWith('grant:') ? `grant ${codeText(decision.by.slice(6))}` : `rule ${codeText(decision.by)}`;
  const why = decision.reason ? ` (${escapeDiscordMarkdown(truncate(oneLine(decision.reason), 300))})` : '';
  const outcome = denied || (view.status === 'approved' && !hasFailed(view)) ? '' : `\n${statusLine(view)}`;
  const line = `${denied ? '❌' : '✅'} ${codeText(view.id)} ${denied ? 'auto-denied' : 'auto-approved'} by ${by}${why} for ${escapeDiscordMarkdown(view.agent)}.`;
  const description = truncate(`${line}${outcome}\n${escapeDiscordMarkdown(view.summary)}`, LIMIT.description);
  const embed: APIEmbed = { title: truncate(view.operation, LIMIT.title), description, color: colourOf(view) };
  if (view.consoleUrl) embed.url = view.consoleUrl;
  return { embeds: [embed], components: [], allowed_mentions: { parse: [] } };
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
  const users = followUp.mention.flatMap((identity) => /^discord:user:(\d{17,20})$/.exec(identity)?.[1] ?? []);
  const roles = followUp.mention.flatMap((identity) => /^discord:role:(\d{17,20})$/.exec(identity)?.[1] ?? []);
  const who = followUp.mention.map(renderIdentity).join(' ') || 'the approvers';
  const missing = Math.max(0, view.quorum - view.approvals.length);
  const what = `**${escapeDiscordMarkdown(view.operation)}** (${codeText(view.id)}) by ${escapeDiscordMarkdown(view.agent)} still waits for ${missing} approval${missing === 1 ? '' : 's'}; it expires <t:${unix(view.expiresAt)}:R> and then does not run.`;
  // Angle brackets: a link without a preview card.
  const link = view.consoleUrl ? ` [Open it](<${view.consoleUrl}>)` : '';
  const content = followUp.kind === 'remind' ? `🔔 Reminder ${who}: ${what}${link}` : `🚨 Escalated to ${who}, who may now decide: ${what}${link}`;
  // Discord accepts at most 100 ids of each kind.
  return { content: truncate(content, CONTENT_LIMIT), allowed_mentions: { parse: [], users: users.slice(0, 100), roles: roles.slice(0, 100) } };
}
