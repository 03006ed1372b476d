/**
 * Anything shaped like a secret twokey or a chat platform issues. Applied to every log line as
 * written, so a secret is caught wherever it hides: a header, a URL's query string, an error message.
 */
export const secretPatterns: readonly RegExp[] = [
  /tk_(?:conf|agent)_[A-Za-z0-9_-]{8,}/g,
  /whsec_[A-Za-z0-9_-]{8,}/g,
  /tk_link_[A-Za-z0-9_-]{8,}/g,
  /xox[abposr]-[A-Za-z0-9-]{6,}/g,
  /xapp-[A-Za-z0-9-]{6,}/g,
  /https:\/\/hooks\.slack\.com\/[^\s"'\\]+/g,
  /\b[MNO][A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}\b/g,
  /(\/(?:webhooks|interactions)\/\d{15,21}\/)[A-Za-z0-9_.-]{20,}/g,
];

/** Replaces every secret-shaped run with `[REDACTED]`; a pattern's first group (a URL's public part) is kept. */
export function scrubSecrets(text: string): string {
  return secretPatterns.reduce(
    (clean, pattern) => clean.replace(pattern, (match, keep: unknown) => (typeof keep === 'string' ? `${keep}[REDACTED]` : '[REDACTED]')),
    text,
  );
}
