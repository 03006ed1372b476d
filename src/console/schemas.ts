import { z } from 'zod';

/**
 * The console's route schemas: what its forms and paths may carry, typed for the handlers. Form
 * values stay lenient on purpose: @fastify/formbody turns a repeated field into an array, which the
 * handlers then treat as missing (a refused CSRF token, a reason ignored), the same answer as before.
 */
const formValue = z.union([z.string(), z.array(z.string())]).optional();

export const assetParams = z.object({ file: z.string().min(1).max(64) });
export const proposalParams = z.object({ id: z.string().min(1).max(64) });
export const agentParams = z.object({ name: z.string().min(1).max(64) });

export const signInForm = z.looseObject({ token: formValue });
/** Every form a signed-in person posts carries the session's CSRF token and, optionally, where to go back to. */
export const sessionForm = z.looseObject({ _csrf: formValue, return: formValue });
export const rejectForm = sessionForm.extend({ reason: formValue });
/** "Approve for…": a duration from the operation's choices, optional uses, and whether to bound params. */
export const grantForm = sessionForm.extend({ duration: formValue, uses: formValue, bounded: formValue });
export const grantParams = z.object({ id: z.string().min(1).max(64) });

export type SessionForm = z.output<typeof sessionForm>;

export const passkeyParams = z.object({ id: z.string().min(1).max(1024) });
/** A form a passkey step posts: the challenge's nonce and the browser's answer as JSON (src/console/assets/passkeys.js). */
export const passkeyForm = sessionForm.extend({ nonce: formValue, credential: formValue, label: formValue });
export type PasskeyForm = z.output<typeof passkeyForm>;

const base64url = z.string().regex(/^[A-Za-z0-9_-]*$/, { error: 'expected base64url' });
const credentialBase = { id: base64url.min(1), rawId: base64url.min(1), type: z.literal('public-key'), clientExtensionResults: z.looseObject({}).default({}) };

/** What `navigator.credentials.get` answered, as @simplewebauthn/browser serialises it. */
export const assertionJson = z.looseObject({
  ...credentialBase,
  authenticatorAttachment: z.enum(['platform', 'cross-platform']).optional(),
  response: z.looseObject({
    clientDataJSON: base64url.min(1),
    authenticatorData: base64url.min(1),
    signature: base64url.min(1),
    userHandle: base64url.optional(),
  }),
});

/** What `navigator.credentials.create` answered. */
export const attestationJson = z.looseObject({
  ...credentialBase,
  authenticatorAttachment: z.enum(['platform', 'cross-platform']).optional(),
  response: z.looseObject({
    clientDataJSON: base64url.min(1),
    attestationObject: base64url.min(1),
    transports: z.array(z.enum(['ble', 'cable', 'hybrid', 'internal', 'nfc', 'smart-card', 'usb'])).optional(),
  }),
});
