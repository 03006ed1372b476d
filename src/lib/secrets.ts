/**
 * Anything shaped like a secret twokey or a chat platform issues. Applied to every log line as
 * written, so a secret is caught wherever it hides: a header, a URL's query string, an error message.
 */
export const secretPatterns: readonly RegExp[] = [
  /tk_(?:conf|agent)_[A-Za-z0-9_-]{8,}/g,
  // Callback secrets: standard base64 (Standard Webhooks); base64url from earlier versions.
  /whsec_[A-Za-z0-9+/_=-]{8,}/g,
  /tk_link_[A-Za-z0-9_-]{8,}/g,
  // An emailed decision link's token: in the request line of its confirm page by design.
  /tk_mail_[A-Za-z0-9_-]{8,}/g,
  /xox[abposr]-[A-Za-z0-9-]{6,}/g,
  /xapp-[A-Za-z0-9-]{6,}/g,
  /https:\/\/hooks\.slack\.com\/[^\s"'\\]+/g,
  /\b[MNO][A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}\b/g,
  /(\/(?:webhooks|interactions)\/\d{15,21}\/)[A-Za-z0-9_.-]{20,}/g,
  // An OpenID Connect authorization code in the console's callback URL (a request log line): short-lived
  // and bound to its PKCE verifier, but a bearer of a sign-in until redeemed.
  /(\/console\/auth\/callback\?(?:[^\s"'\\]*?[?&])?code=)[^&\s"'\\]+/g,
];

/** Replaces every secret-shaped run with `[REDACTED]`; a pattern's first group (a URL's public part) is kept. */
export function scrubSecrets(text: string): string {
  return secretPatterns.reduce(
    (clean, pattern) => clean.replace(pattern, (match, keep: unknown) => (typeof keep === 'string' ? `${keep}[REDACTED]` : '[REDACTED]')),
    text,
  );
}

/**
 * Credentials other services issue, by the prefixes and shapes their issuers document (the same
 * shapes gitleaks' and secretlint's rules look for). Applied to what a downstream service answered
 * before chat shows any of it: such an answer may echo the keys it was called with. No npm package
 * offers these as plain synchronous patterns (secretlint's rules run inside its own async engine and
 * have no Stripe rule), hence this table; add a row when a provider documents a new prefix.
 */
export const providerSecretShapes: ReadonlyArray<{ provider: string; pattern: RegExp; check?: (match: string) => boolean }> = [
  { provider: 'Stripe secret and restricted keys', pattern: /\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}/g },
  { provider: 'AWS access key ids', pattern: /\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16}\b/g },
  { provider: 'GitHub tokens', pattern: /\bgh[pousr]_[A-Za-z0-9]{20,}/g },
  { provider: 'GitHub fine-grained tokens', pattern: /\bgithub_pat_[A-Za-z0-9_]{20,}/g },
  { provider: 'GitLab tokens', pattern: /\bglpat-[A-Za-z0-9_-]{20,}/g },
  { provider: 'Slack tokens', pattern: /\bxox[a-z]-[A-Za-z0-9-]{6,}/g },
  { provider: 'OpenAI and Anthropic keys', pattern: /\bsk-[A-Za-z0-9_-]{20,}/g },
  { provider: 'Google API keys', pattern: /\bAIza[0-9A-Za-z_-]{35}/g },
  { provider: 'npm tokens', pattern: /\bnpm_[A-Za-z0-9]{36}/g },
  { provider: 'SendGrid keys', pattern: /\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}/g },
  { provider: 'Hugging Face tokens', pattern: /\bhf_[A-Za-z0-9]{30,}/g },
  { provider: 'JSON Web Tokens', pattern: /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g },
  { provider: 'private keys', pattern: /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g },
  // user:password@ in a URL keeps the scheme and the host, loses the credentials.
  { provider: 'credentials in URLs', pattern: /(?<=:\/\/)[^/\s:@"']+:[^/\s@"']+(?=@)/g },
  {
    // Last, so a key with a prefix above goes whole first. 40 characters of base64 standing alone;
    // the mix of cases and digits (or / and +) sets it apart from a hex digest (a git commit id).
    provider: 'AWS secret access keys',
    pattern: /(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])/g,
    check: (match) => /[A-Z]/.test(match) && /[a-z]/.test(match) && /[0-9/+]/.test(match),
  },
];

/** `scrubSecrets`, and every provider shape above: for text that reaches people who hold none of it. */
export function scrubAnySecret(text: string): string {
  return providerSecretShapes.reduce(
    (clean, { pattern, check }) => clean.replace(pattern, (match) => (check && !check(match) ? match : '[REDACTED]')),
    scrubSecrets(text),
  );
}

/** A key whose value is a secret, whatever it looks like: `password`, `apiKey`, `auth_token`, `db_credentials`… */
export const SECRET_KEY_NAME = /secret|password|token|key|auth|credential/i;

/**
 * A JSON value fit to show to a channel: every value under a secret-looking key becomes
 * `[REDACTED]` (objects and arrays whole), and every string is scrubbed of secret shapes.
 */
export function redactSecretValues(value: unknown): unknown {
  if (typeof value === 'string') return scrubAnySecret(value);
  if (Array.isArray(value)) return value.map(redactSecretValues);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.entries(value).map(([key, inner]) => [scrubAnySecret(key), SECRET_KEY_NAME.test(key) ? '[REDACTED]' : redactSecretValues(inner)]),
    );
  }
  return value;
}
