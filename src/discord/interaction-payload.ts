import { InteractionType } from 'discord.js';
import { DISCORD_SNOWFLAKE as SNOWFLAKE, discordRoleIdentity, discordUserIdentity } from './platform.js';
import type { Decider } from '../core/model.js';
import { isRecord } from '../lib/records.js';

/** What twokey reads of an interaction before deciding how to answer it. */
export interface InteractionMeta {
  id: string;
  token: string;
  applicationId: string;
  decider: Decider | null;
}

/** The values of a submitted modal by custom_id: a text input's text, or a select menu's chosen values. */
export type ModalFields = ReadonlyMap<string, string | readonly string[]>;

export type ParsedInteraction =
  | { kind: 'ping' }
  | { kind: 'component'; meta: InteractionMeta; customId: string }
  | { kind: 'modal'; meta: InteractionMeta; customId: string; fields: ModalFields }
  /** Signed by Discord but not shaped like anything Discord sends: answered with a 400 naming the problem. */
  | { kind: 'malformed'; problem: string }
  | { kind: 'other'; meta: InteractionMeta };

const stringAt = (record: Record<string, unknown> | undefined, key: string): string | undefined =>
  typeof record?.[key] === 'string' ? record[key] : undefined;
const recordAt = (record: Record<string, unknown> | undefined, key: string): Record<string, unknown> | undefined =>
  isRecord(record?.[key]) ? record[key] : undefined;

/**
 * Who clicked, as twokey identities. The roles come from the interaction itself (Discord signs the
 * HTTP request; the gateway is an authenticated connection), so no extra API call and no cache that
 * could be stale.
 */
function deciderOf(interaction: Record<string, unknown>): Decider | null {
  const member = recordAt(interaction, 'member');
  const userId = stringAt(recordAt(member, 'user'), 'id') ?? stringAt(recordAt(interaction, 'user'), 'id');
  if (!userId || !SNOWFLAKE.test(userId)) return null;
  const roles = Array.isArray(member?.roles) ? member.roles.filter((r): r is string => typeof r === 'string' && SNOWFLAKE.test(r)) : [];
  const guildId = stringAt(interaction, 'guild_id');
  // Discord leaves @everyone (whose id is the guild's) out of member.roles; a config may still name it.
  if (member && guildId && SNOWFLAKE.test(guildId)) roles.push(guildId);
  return { identity: discordUserIdentity(userId), memberOf: roles.map(discordRoleIdentity), via: 'discord' };
}

const MAX_FIELD_DEPTH = 4;

/**
 * Every value of a submitted modal, found in either layout (a Label holding one component, or the
 * legacy action rows). A value of the wrong shape is left out, so the form reads it as missing.
 */
function collectFields(components: unknown, into: Map<string, string | readonly string[]>, depth = 0): Map<string, string | readonly string[]> {
  if (!Array.isArray(components) || depth > MAX_FIELD_DEPTH) return into;
  for (const component of components) {
    if (!isRecord(component)) continue;
    const customId = stringAt(component, 'custom_id');
    if (customId && !into.has(customId)) {
      if (typeof component.value === 'string') into.set(customId, component.value);
      else if (Array.isArray(component.values) && component.values.every((v) => typeof v === 'string')) into.set(customId, component.values as string[]);
    }
    collectFields(component.components, into, depth + 1);
    if (component.component) collectFields([component.component], into, depth + 1);
  }
  return into;
}

/** Narrows an untrusted payload to the few fields twokey reads; null when it is not an interaction. */
export function parseInteraction(payload: unknown): ParsedInteraction | null {
  if (!isRecord(payload) || typeof payload.type !== 'number') return null;
  if (payload.type === InteractionType.Ping) return { kind: 'ping' };
  const id = stringAt(payload, 'id');
  const token = stringAt(payload, 'token');
  const applicationId = stringAt(payload, 'application_id');
  if (!id || !token || !applicationId || !SNOWFLAKE.test(applicationId)) return null;
  const meta: InteractionMeta = { id, token, applicationId, decider: deciderOf(payload) };
  const data = recordAt(payload, 'data');
  const customId = stringAt(data, 'custom_id');
  if (payload.type === InteractionType.MessageComponent) {
    return customId ? { kind: 'component', meta, customId } : { kind: 'malformed', problem: 'a component interaction needs data.custom_id' };
  }
  if (payload.type === InteractionType.ModalSubmit) {
    return customId
      ? { kind: 'modal', meta, customId, fields: collectFields(data?.components, new Map()) }
      : { kind: 'malformed', problem: 'a modal submission needs data.custom_id' };
  }
  return { kind: 'other', meta };
}
