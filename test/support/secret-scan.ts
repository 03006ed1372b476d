/**
 * Finds anything shaped like a secret in text that should hold none (logs, error bodies). Its
 * patterns are deliberately broader than the logger's scrubber, so a gap in the scrubber shows up
 * here instead of hiding behind the same regular expression.
 */
const SECRET_SHAPES: readonly RegExp[] = [
  /tk_(?:conf|agent|link|mail)_[A-Za-z0-9_-]{6,}/,
  /whsec_[A-Za-z0-9+/_=-]{6,}/,
  /xox[a-z]-[A-Za-z0-9-]{4,}/,
  /xapp-[A-Za-z0-9-]{4,}/,
  /hooks\.slack\.com\/(?:actions|commands|services)\/[A-Za-z0-9/_-]+/,
  /\/(?:webhooks|interactions)\/\d{15,21}\/[A-Za-z0-9_.-]{20,}/,
  /\b[MNO][A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}\b/,
  // Other providers' keys a downstream answer may echo (src/lib/secrets.ts redacts them from chat).
  /\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{6,}/,
  /\bA(?:KIA|SIA)[A-Z0-9]{12,}/,
  /\bgh[pousr]_[A-Za-z0-9]{12,}/,
  /\bgithub_pat_[A-Za-z0-9_]{12,}/,
  /\bsk-[A-Za-z0-9_-]{12,}/,
];

export function findSecrets(text: string, literals: readonly string[] = []): string[] {
  const found = SECRET_SHAPES.flatMap((shape) => text.match(shape)?.[0] ?? []);
  for (const literal of literals) if (literal.length >= 8 && text.includes(literal)) found.push(`${literal.slice(0, 4)}… (a known secret)`);
  return found;
}

export function assertNoSecrets(where: string, text: string, literals: readonly string[] = []): void {
  const found = findSecrets(text, literals);
  if (found.length > 0) throw new Error(`${where} holds secret-shaped text: ${found.map((f) => f.slice(0, 16)).join(', ')}`);
}
