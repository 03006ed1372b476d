/**
 * `npm run bench:display`: the cost of `displaySafe` (every `{{ … }}` of a summary, every string the
 * console shows of params and results) on ordinary values and on the largest hostile values a
 * proposal can carry (the request body is capped at 256 KiB): long text in scripts written with
 * marks, stacked and overlay marks, blank padding. Best of 7 runs each, in milliseconds; the
 * summary's render budget is 1,000 ms.
 *
 *   npm run bench:display
 */
import { performance } from 'node:perf_hooks';
import { displaySafe } from '../src/config/display-text.js';

const CASES: Record<string, string> = {
  'an ordinary value (45 chars)': 'Acme Corporation, invoice 42 for the pro plan',
  'a look-alike (4 chars)': '\u0410\u0421\u041C\u0415',
  'ASCII text, 96k chars': 'hello world '.repeat(8_000),
  'Cyrillic text with look-alikes, 96k chars': 'Привет мир АСМЕ '.repeat(6_000),
  'Hindi text, 100k chars': 'नमस्ते दुनिया '.repeat(7_700),
  'accents and strike-through on Latin, 90k chars': 'e\u0301\u0336'.repeat(30_000),
  'one letter under 85k marks': `a${'\u0301'.repeat(85_000)}`,
  'braille blanks and ideographic spaces, 100k chars': '\u2800\u3000'.repeat(50_000),
};

for (const [name, text] of Object.entries(CASES)) {
  const repeat = text.length < 100 ? 10_000 : 1;
  displaySafe(text);
  let best = Number.POSITIVE_INFINITY;
  for (let run = 0; run < 7; run += 1) {
    const started = performance.now();
    for (let i = 0; i < repeat; i += 1) displaySafe(text);
    best = Math.min(best, (performance.now() - started) / repeat);
  }
  console.log(`${name}: ${best < 0.01 ? best.toFixed(4) : best.toFixed(1)} ms`);
}
