import type * as z from 'zod';
import type { IdentityForm } from './identity.js';

/**
 * What a chat platform declares about itself, in `src/<name>/platform.ts`: everything the core,
 * the config and the CLI need to know of it without loading its library. The core never names a
 * platform: it receives these declarations (`src/platforms/index.ts` lists them) or their names.
 * How to add one: src/chat/README.md, "Adding a chat platform".
 */
export interface ChatPlatformDeclaration<Approval extends object = object, Escalate extends object = object> {
  /** The key under `approval.<name>` and `escalate.<name>`, in `chat.sync` jobs and in `Decider.via`. */
  readonly name: string;
  /** How people call it: "Slack". */
  readonly label: string;
  /** Its identities, persons and groups, in the order error messages list them. */
  readonly identityForms: readonly IdentityForm[];
  /** An operation's `approval.<name>`: where its messages go. Present means the operation is on this platform. */
  readonly approvalPart: z.ZodType<Approval>;
  /**
   * True when its messages go to each approver of its own form rather than to a channel (email):
   * naming such an approver puts the operation on the platform, with its part's defaults, as if
   * `approval.<name>: {}` were written. A part with a required field cannot be implied.
   */
  readonly reachesApproversDirectly?: boolean;
  /** An escalation's `escalate.<name>`: where it is also posted. */
  readonly escalatePart: z.ZodType<Escalate>;
  /** Where an operation's messages go, in words (the MCP tool description): "Slack channel C0123". */
  describePart(part: Approval): string;
  /** A valid part of each kind, as the config file would give it: the registry's test reads them. */
  readonly examples: { readonly approval: Approval; readonly escalate: Escalate };
  readonly env: {
    /** Its variables, merged into the environment's schema; every schema carries its own message (they may be secrets). */
    readonly schema: z.ZodObject;
    /** Rules that span its variables, as `NAME: why`; `vars` holds the raw strings set. */
    issues?(vars: Readonly<Record<string, string | undefined>>): string[];
    /** True when the environment asks for it: only then is its module (and its library) loaded. */
    isConfigured(env: Readonly<Record<string, unknown>>): boolean;
  };
  /**
   * Its stored clicks: job kind → payload schema. A kind is stored in `jobs.kind` and must keep its
   * name for good, so rows written by an earlier version still run. They run in the `clicks` lane.
   */
  readonly clickJobs: Readonly<Record<string, z.ZodType>>;
}

/**
 * The types of each platform's parts, which the core cannot import: each `platform.ts` adds its
 * own, `declare module '../core/chat-platform.js' { interface ChatPlatformParts { slack: { approval:
 * …; escalate: … } } }`, so an operation's `approval.slack` keeps its type.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled by declaration merging
export interface ChatPlatformParts {}

/** The stored click kinds' payload schemas, added the same way by each `platform.ts`. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled by declaration merging
export interface ChatPlatformJobs {}

type PartOf<P extends keyof ChatPlatformParts, Which extends 'approval' | 'escalate'> = ChatPlatformParts[P] extends { [K in Which]: infer Part }
  ? Part
  : never;

/** `approval.<name>` of an operation, one optional key per platform. */
export type ApprovalParts = { [P in keyof ChatPlatformParts]?: PartOf<P, 'approval'> };
/** `escalate.<name>` of an operation's escalation, one optional key per platform. */
export type EscalateParts = { [P in keyof ChatPlatformParts]?: PartOf<P, 'escalate'> };

/**
 * A registered chat platform's name: the core knows platforms by name only. The names come from the
 * declarations' `ChatPlatformParts`, so a job naming an unregistered platform does not compile.
 */
export type ChatPlatformName = keyof ChatPlatformParts & string;

/** The part an operation's approval (or escalation) gives a platform, or undefined when none. */
export function chatPartOf(holder: object | undefined, platform: string): object | undefined {
  const part: unknown = holder ? (holder as Record<string, unknown>)[platform] : undefined;
  return typeof part === 'object' && part !== null ? part : undefined;
}

/** The channel a part names, or null when it names none (a platform whose part has no `channel`). */
export function channelOfPart(part: object | undefined): string | null {
  const channel: unknown = part ? (part as { channel?: unknown }).channel : undefined;
  return typeof channel === 'string' && channel !== '' ? channel : null;
}

/**
 * Where a platform posts an operation's message, or null when the operation is not on it: the
 * part's `channel`, or the platform's name for a part that has none (the platform's publisher
 * reads the rest of the part itself).
 */
export function destinationOf(holder: object | undefined, platform: string): string | null {
  const part = chatPartOf(holder, platform);
  if (!part) return null;
  if ('channel' in part) return channelOfPart(part);
  return platform;
}
