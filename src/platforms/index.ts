import type * as z from 'zod';
import { chatPartOf, type ChatPlatformDeclaration, type ChatPlatformName } from '../core/chat-platform.js';
import { identityGrammar } from '../core/identity.js';
import { discordPlatform } from '../discord/platform.js';
import { emailPlatform } from '../email/platform.js';
import { slackPlatform } from '../slack/platform.js';
import { teamsPlatform } from '../teams/platform.js';

/**
 * The chat platforms twokey knows: the one list. Each entry is a platform's declaration
 * (`src/<name>/platform.ts`: identities, config parts, variables, stored clicks), never its library;
 * config, identities, the job catalogue and the CLI read them from here, and the runtime loads a
 * configured platform's module (`src/runtime/integrations.ts`). Adding one: src/chat/README.md.
 */
export const chatPlatforms = [slackPlatform, discordPlatform, teamsPlatform, emailPlatform] as const satisfies readonly ChatPlatformDeclaration[];

export type ChatPlatform = (typeof chatPlatforms)[number];
/** The registered platforms' names, as a type: what the runtime's loaders must cover. */
export type RegisteredPlatformName = ChatPlatform['name'];

// Every registered platform declares its part types (`ChatPlatformParts`), and nothing else does.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const namesAreDeclared: Same<RegisteredPlatformName, ChatPlatformName> = true;
void namesAreDeclared;

export const chatPlatformNames = chatPlatforms.map((platform) => platform.name) as unknown as readonly [RegisteredPlatformName, ...RegisteredPlatformName[]];

/** The identity grammar of every platform's forms and the core's (web, oidc). */
export const identities = identityGrammar(chatPlatforms.flatMap((platform) => platform.identityForms));

type UnionToIntersection<U> = (U extends unknown ? (arg: U) => void : never) extends (arg: infer I) => void ? I : never;
type EnvOf<P> = P extends { env: { schema: infer S extends z.ZodObject } } ? z.output<S> : never;
/** The validated variables of every platform, as the environment holds them. */
export type ChatPlatformsEnv = Readonly<UnionToIntersection<EnvOf<ChatPlatform>>>;

/** The declarations as the core's type, for code that reads any platform alike. */
export const chatPlatformDeclarations: readonly ChatPlatformDeclaration[] = chatPlatforms;

/** The platform of a name, or undefined. */
export const chatPlatform = (name: string): ChatPlatformDeclaration | undefined => chatPlatformDeclarations.find((platform) => platform.name === name);

/** Every platform by its label, for "no Slack or Discord configured". */
export const chatPlatformLabels = ((labels: string[]) => (labels.length < 2 ? labels.join('') : `${labels.slice(0, -1).join(', ')} or ${labels.at(-1)}`))(
  chatPlatforms.map((platform) => platform.label),
);

/** Where an operation's messages go, in words, for each platform it is on: "Slack channel C0123". */
export function describeChatParts(approval: object): string[] {
  return chatPlatformDeclarations.flatMap((platform) => {
    const part = chatPartOf(approval, platform.name);
    return part ? [platform.describePart(part)] : [];
  });
}
