import { ComponentType, InteractionResponseType, TextInputStyle, type APIInteractionResponse } from 'discord.js';
import { durationLabel } from '../lib/duration.js';
import type { GrantRequest } from '../core/grant-service.js';
import type { ModalFields } from './interaction-payload.js';
import { customIdFor } from './message.js';

/** The forms a click opens. Their custom_id is the button's, so a submission names its proposal. */

export const REASON_INPUT = 'reason';
export const GRANT_DURATION_INPUT = 'duration';
export const GRANT_USES_INPUT = 'uses';
export const GRANT_BOUNDS_INPUT = 'bounds';

/** The same ceiling the core enforces; here it only shapes the words of a refusal. */
const MAX_USES = 10_000;

// Discord caps modal titles and labels at 45 characters.
const title = (text: string): string => text.slice(0, 45);

export function rejectModal(proposalId: string, operation: string | undefined): APIInteractionResponse {
  return {
    type: InteractionResponseType.Modal,
    data: {
      custom_id: customIdFor('reject', proposalId),
      title: title(operation ? `Reject ${operation}` : 'Reject this proposal'),
      components: [
        {
          type: ComponentType.Label,
          label: 'Reason',
          description: 'Optional. The agent and this channel will see it.',
          component: { type: ComponentType.TextInput, custom_id: REASON_INPUT, style: TextInputStyle.Paragraph, required: false, max_length: 500 },
        },
      ],
    },
  };
}

/**
 * "Approve for…": this proposal is approved, and the same operation of the same agent for the chosen
 * time, optionally for a number of uses and only up to this proposal's params (the choices Slack's
 * modal offers). Select menus rather than free text wherever Discord allows, so only the configured
 * durations can be picked.
 */
export function grantModal(proposalId: string, operation: string, durationsMs: readonly number[]): APIInteractionResponse {
  return {
    type: InteractionResponseType.Modal,
    data: {
      custom_id: customIdFor('grant', proposalId),
      title: title(`Approve ${operation} for a while`),
      components: [
        {
          type: ComponentType.Label,
          label: 'For how long',
          description: 'Approves this, and the same operation of this agent, for this long.',
          component: {
            type: ComponentType.StringSelect,
            custom_id: GRANT_DURATION_INPUT,
            required: true,
            min_values: 1,
            max_values: 1,
            options: durationsMs.map((ms, index) => ({ label: durationLabel(ms), value: String(ms), default: index === 0 })),
          },
        },
        {
          type: ComponentType.Label,
          label: 'At most this many proposals',
          description: 'Optional. Empty: no limit until it expires.',
          component: {
            type: ComponentType.TextInput,
            custom_id: GRANT_USES_INPUT,
            style: TextInputStyle.Short,
            required: false,
            max_length: 5,
            placeholder: 'no limit',
          },
        },
        {
          type: ComponentType.Label,
          label: 'Bounds',
          component: {
            type: ComponentType.StringSelect,
            custom_id: GRANT_BOUNDS_INPUT,
            required: false,
            min_values: 1,
            max_values: 1,
            options: [
              { label: 'Any params', value: 'any', default: true },
              {
                label: "Amounts up to this proposal's, other params as in it",
                description: 'A param this proposal lacks must stay absent.',
                value: 'bounded',
              },
            ],
          },
        },
      ],
    },
  };
}

/**
 * What a grant form asks for. `malformed`: a field Discord always sends is missing or not what the
 * form offered (a forged or broken payload: a 400). `refusal`: the person typed something that is
 * not a number of uses (told privately).
 */
export type GrantForm = { request: GrantRequest } | { malformed: string } | { refusal: string };

export function readGrantForm(fields: ModalFields): GrantForm {
  const duration = fields.get(GRANT_DURATION_INPUT);
  const [chosen] = Array.isArray(duration) ? duration : [];
  if (typeof chosen !== 'string' || !/^[1-9]\d{0,15}$/.test(chosen)) return { malformed: 'the grant form needs one duration in milliseconds' };
  const bounds = fields.get(GRANT_BOUNDS_INPUT);
  if (bounds !== undefined && (!Array.isArray(bounds) || bounds.some((value) => value !== 'any' && value !== 'bounded'))) {
    return { malformed: 'the grant form\'s bounds must be "any" or "bounded"' };
  }
  const usesText = fields.get(GRANT_USES_INPUT);
  if (usesText !== undefined && typeof usesText !== 'string') return { malformed: "the grant form's uses must be text" };
  const trimmed = usesText?.trim() ?? '';
  if (trimmed !== '' && (!/^\d{1,5}$/.test(trimmed) || Number(trimmed) < 1 || Number(trimmed) > MAX_USES)) {
    return { refusal: `The number of proposals must be a whole number from 1 to ${MAX_USES}, or empty for no limit.` };
  }
  return {
    request: {
      durationMs: Number(chosen),
      maxUses: trimmed === '' ? null : Number(trimmed),
      bounded: Array.isArray(bounds) && bounds.includes('bounded'),
    },
  };
}
