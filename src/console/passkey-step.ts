import type { FastifyRequest } from 'fastify';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import type { z } from 'zod';
import { TwokeyError } from '../core/errors.js';
import type { RelyingParty } from '../passkeys/service.js';
import { field } from './respond.js';
import { assertionJson, attestationJson } from './schemas.js';

/**
 * The relying party a passkey is made for: the origin people use (TWOKEY_PUBLIC_URL), or without
 * one the origin this request came to (a local set-up on http://localhost:PORT). The browser puts
 * the origin it saw in what it signs, and the RP ID in the authenticator data, so a passkey made
 * here answers nowhere else.
 */
export function relyingPartyOf(request: FastifyRequest, publicOrigin: string | null): RelyingParty {
  // As a browser writes it: no default port (http://localhost:80 is http://localhost).
  const url = new URL(publicOrigin ?? `${request.protocol}://${request.host}`);
  return { origin: url.origin, id: url.hostname, name: 'twokey' };
}

function parsed<T extends z.ZodType>(schema: T, text: string | undefined, what: string): z.output<T> {
  if (!text)
    throw new TwokeyError('step_up_required', `The form carried no ${what}: this needs your passkey, through the passkey button (it needs JavaScript).`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new TwokeyError('step_up_failed', `The ${what} is not JSON.`);
  }
  const result = schema.safeParse(value);
  if (!result.success) throw new TwokeyError('step_up_failed', `The ${what} is not one a browser makes: ${result.error.issues[0]?.message ?? 'wrong shape'}.`);
  return result.data;
}

/** The nonce and the browser's assertion a step-up approval form posted. */
export function assertionFrom(body: unknown): { nonce: string; response: AuthenticationResponseJSON } {
  const response = parsed(assertionJson, field(body, 'credential'), 'passkey assertion') as AuthenticationResponseJSON;
  return { nonce: field(body, 'nonce') ?? '', response };
}

/** The nonce, the browser's new credential and its label a registration form posted. */
export function attestationFrom(body: unknown): { nonce: string; response: RegistrationResponseJSON; label: string } {
  const response = parsed(attestationJson, field(body, 'credential'), 'new passkey') as RegistrationResponseJSON;
  return { nonce: field(body, 'nonce') ?? '', response, label: field(body, 'label') ?? '' };
}
