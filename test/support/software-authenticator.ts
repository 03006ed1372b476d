import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';

/**
 * A WebAuthn authenticator in software (ES256 on P-256, "none" attestation), for tests that need
 * real registrations and assertions without a browser. It builds the same bytes a browser and a
 * platform authenticator would: client data JSON, authenticator data, a DER ECDSA signature over
 * authenticatorData || SHA-256(clientDataJSON). Options let a test break one part at a time.
 */
export interface AssertOptions {
  origin?: string;
  rpId?: string;
  /** The user-verified flag; a real one sets it after a PIN or a fingerprint. */
  userVerified?: boolean;
  /** The counter to report; by default one more than the last. */
  counter?: number;
  type?: string;
}

const sha256 = (data: Uint8Array | string): Buffer => createHash('sha256').update(data).digest();
const b64 = (data: Uint8Array): string => Buffer.from(data).toString('base64url');

function counterBytes(counter: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(counter);
  return bytes;
}

export class SoftwareAuthenticator {
  readonly credentialId = randomBytes(16);
  private readonly privateKey: KeyObject;
  private readonly cosePublicKey: Uint8Array;
  private counter = 0;

  constructor(
    readonly origin: string,
    readonly rpId = new URL(origin).hostname,
  ) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    this.privateKey = privateKey;
    const jwk = publicKey.export({ format: 'jwk' });
    const coseKey = new Map<number, number | Uint8Array>([
      [1, 2], // kty: EC2
      [3, -7], // alg: ES256
      [-1, 1], // crv: P-256
      [-2, new Uint8Array(Buffer.from(jwk.x ?? '', 'base64url'))],
      [-3, new Uint8Array(Buffer.from(jwk.y ?? '', 'base64url'))],
    ]);
    this.cosePublicKey = isoCBOR.encode(coseKey);
  }

  get id(): string {
    return b64(this.credentialId);
  }

  /** What `navigator.credentials.create` answers for these options' challenge. */
  register(challenge: string, options: { origin?: string; userVerified?: boolean } = {}): RegistrationResponseJSON {
    const clientDataJSON = Buffer.from(JSON.stringify({ type: 'webauthn.create', challenge, origin: options.origin ?? this.origin, crossOrigin: false }));
    const flags = 0x01 | (options.userVerified === false ? 0 : 0x04) | 0x40; // UP, UV, AT
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(this.credentialId.length);
    const authData = Buffer.concat([
      sha256(this.rpId),
      Buffer.from([flags]),
      counterBytes(0),
      Buffer.alloc(16), // AAGUID: none
      idLength,
      this.credentialId,
      this.cosePublicKey,
    ]);
    const attestationObject = isoCBOR.encode(
      new Map<string, string | Map<string, string> | Uint8Array>([
        ['fmt', 'none'],
        ['attStmt', new Map<string, string>()],
        ['authData', new Uint8Array(authData)],
      ]),
    );
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      clientExtensionResults: {},
      response: { clientDataJSON: b64(clientDataJSON), attestationObject: b64(attestationObject), transports: ['internal'] },
    };
  }

  /** What `navigator.credentials.get` answers for this challenge. */
  assert(challenge: string, options: AssertOptions = {}): AuthenticationResponseJSON {
    this.counter = options.counter ?? this.counter + 1;
    const clientDataJSON = Buffer.from(
      JSON.stringify({ type: options.type ?? 'webauthn.get', challenge, origin: options.origin ?? this.origin, crossOrigin: false }),
    );
    const flags = 0x01 | (options.userVerified === false ? 0 : 0x04);
    const authenticatorData = Buffer.concat([sha256(options.rpId ?? this.rpId), Buffer.from([flags]), counterBytes(this.counter)]);
    const signature = sign('sha256', Buffer.concat([authenticatorData, sha256(clientDataJSON)]), this.privateKey);
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      clientExtensionResults: {},
      response: { clientDataJSON: b64(clientDataJSON), authenticatorData: b64(authenticatorData), signature: b64(signature) },
    };
  }
}
