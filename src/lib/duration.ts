const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION = /^(\d+)(ms|s|m|h|d)$/;

/**
 * `"5m"` → `300000` (milliseconds). One integer and one unit (ms, s, m, h, d). A bare
 * number is refused on purpose: `expiresIn: 300` could mean seconds or milliseconds, and a
 * guess that is off by 1000 on an approval window is worse than an error at start.
 */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text.trim());
  const amount = match?.[1];
  const unit = match?.[2] as keyof typeof UNIT_MS | undefined;
  if (amount === undefined || unit === undefined) {
    throw new RangeError(`invalid duration "${text}": expected an integer and a unit (ms, s, m, h, d), such as 30s or 5m`);
  }
  const ms = Number(amount) * UNIT_MS[unit];
  if (!Number.isSafeInteger(ms)) throw new RangeError(`invalid duration "${text}": too large`);
  return ms;
}

/** `3600000` → `1 h`, `900000` → `15 min`: a duration as chat shows it on a button or in a list. */
export function durationLabel(ms: number): string {
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000} d`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  return `${Math.round(ms / 60_000)} min`;
}
