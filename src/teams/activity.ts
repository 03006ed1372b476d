import { teamsUserIdentity } from './platform.js';
import type { Decider } from '../core/model.js';
import { parseVerb, REASON_INPUT, type TeamsAction } from './adaptive-card.js';

/**
 * An activity from the Bot Framework narrowed to what twokey reads. Only its authenticated
 * envelope vouches for it (src/teams/auth.ts), so every field is checked for shape here.
 */
export type ParsedActivity =
  | { kind: 'malformed'; problem: string }
  /** Messages, installs, conversation updates: nothing for twokey to do. */
  | { kind: 'ignored'; type: string }
  /** An invoke twokey does not handle (a message extension, a task module). */
  | { kind: 'other-invoke'; name: string }
  | { kind: 'card-action'; meta: ActionMeta; action: TeamsAction | null; proposalId: string | null; reason: string | null };

export interface ActionMeta {
  /** The activity id, to tell a repeated delivery from a second click. */
  id: string;
  serviceUrl: string;
  conversationId: string | null;
  /** `teams:<aadObjectId>`; null when Teams sent no Entra object id (an anonymous or guest context). */
  decider: Decider | null;
}

const PROPOSAL_ID = /^[A-Za-z0-9_-]{1,80}$/;
const MAX_REASON = 2_000;

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/** The serviceUrl an activity claims, read before anything else: the token must vouch for the same one. */
export const claimedServiceUrl = (payload: unknown): unknown => (isObject(payload) ? payload.serviceUrl : undefined);

export function parseActivity(payload: unknown): ParsedActivity {
  if (!isObject(payload)) return { kind: 'malformed', problem: 'the body is not an activity (expected a JSON object)' };
  const type = text(payload.type);
  if (!type) return { kind: 'malformed', problem: 'the activity has no type' };
  if (type !== 'invoke') return { kind: 'ignored', type };
  const name = text(payload.name) ?? '';
  if (name !== 'adaptiveCard/action') return { kind: 'other-invoke', name };
  const id = text(payload.id);
  const serviceUrl = text(payload.serviceUrl);
  if (!id || !serviceUrl) return { kind: 'malformed', problem: 'the invoke activity needs an id and a serviceUrl' };
  const value = isObject(payload.value) ? payload.value : null;
  const action = value && isObject(value.action) ? value.action : null;
  if (!action || action.type !== 'Action.Execute') return { kind: 'malformed', problem: 'adaptiveCard/action needs value.action of type Action.Execute' };
  const data = isObject(action.data) ? action.data : {};
  const from = isObject(payload.from) ? payload.from : {};
  const aadObjectId = text(from.aadObjectId);
  const identity = aadObjectId ? teamsUserIdentity(aadObjectId) : null;
  const conversation = isObject(payload.conversation) ? payload.conversation : {};
  const proposalId = text(data.proposalId);
  const reason = data[REASON_INPUT];
  if (reason !== undefined && typeof reason !== 'string') return { kind: 'malformed', problem: `the card's ${REASON_INPUT} must be text` };
  const trimmed = typeof reason === 'string' ? reason.trim().slice(0, MAX_REASON) : '';
  return {
    kind: 'card-action',
    meta: { id, serviceUrl, conversationId: text(conversation.id), decider: identity ? { identity, via: 'teams' } : null },
    action: parseVerb(action.verb),
    proposalId: proposalId && PROPOSAL_ID.test(proposalId) ? proposalId : null,
    reason: trimmed === '' ? null : trimmed,
  };
}
