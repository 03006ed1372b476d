import { createRequire } from 'node:module';
import { getCategory, getCombiningClass, getScript } from 'unicode-properties';

/**
 * Agent-chosen text (a param value) shown to a human deciding on it must read as one value: it must
 * not start new lines that look like twokey's own ("Cost: $1.00", "Approved by security ✅"), reorder
 * itself with bidi controls, hide characters, pad itself out with blanks, strike itself through, or
 * pass a Cyrillic "АСМЕ" off as a Latin "ACME".
 */

/** Shown in place of a line break inside a value. */
export const LINE_BREAK_MARK = '⏎';

// Unicode's confusables.txt (UTS 39), one code point → its prototype, as the unhomoglyph package ships
// it. Read as data: the package's own function builds a 6,000-way regular expression at load (~100 ms).
const CONFUSABLE_PROTOTYPES = new Map(Object.entries(createRequire(import.meta.url)('unhomoglyph/data.json') as Record<string, string>));

// Scripts that legitimately mix inside one word (UTS 39's Japanese, Korean and Chinese sets).
const HAN_FAMILY = new Set(['Han', 'Hiragana', 'Katakana', 'Hangul', 'Bopomofo']);
// Scripts written with precomposed letters: a combining mark NFC cannot fold into its letter is
// unusual there, and is how strike-through (A̶) and stacked marks are made.
const PRECOMPOSED_SCRIPTS = new Set(['Latin', 'Greek', 'Cyrillic', 'Common']);
// More marks than this on one letter cover the lines around it, in any script.
const MAX_MARKS_ON_ONE_LETTER = 4;
// A zero width joiner between two pictographs builds one emoji (👩‍💻); anywhere else it hides.
const AFTER_PICTOGRAPH = /\p{Extended_Pictographic}[\p{Emoji_Modifier}\uFE0F]*$/u;
const BEFORE_PICTOGRAPH = /^\p{Extended_Pictographic}/u;

// Characters that render as nothing, or as blank space, but are not the ASCII space: non-ASCII
// spaces (Zs: no-break, en/em, ideographic U+3000…), the braille blank, the Hangul fillers, and
// default-ignorable marks (combining grapheme joiner, Khmer inherent vowels, Mongolian selectors).
const BLANK = '[\\u00A0\\u1680\\u2000-\\u200A\\u202F\\u205F\\u3000\\u2800\\u3164\\uFFA0\\u115F\\u1160]';
// Alternatives rather than a class: a class listing combining marks reads as if they combined.
const IGNORABLE_MARK = '\\u034F|\\u17B4|\\u17B5|\\u180B|\\u180C|\\u180D|\\u180F';
// One character, or a run of one repeated character, that is shown as a code point label or ⏎.
const INVISIBLE_OR_BREAKING = new RegExp(`\\r\\n|([\\p{Cc}\\p{Cf}\\p{Co}\\p{Cn}\\p{Zl}\\p{Zp}]|${BLANK}|${IGNORABLE_MARK})\\1*`, 'gu');
const MARK_RUN = /\p{M}+/gu;
const WORD = /[\p{L}\p{M}\p{N}]+/gu;
const ASCII = /^[\x20-\x7E]*$/;
const ASCII_ALPHANUMERIC = /^[A-Za-z0-9]+$/;
const VARIATION_SELECTOR = /[\uFE00-\uFE0F\u{E0100}-\u{E01EF}]/u;
const KEYCAP_BASE = /^[0-9#*]$/;
const NON_ASCII_WORD_CHARACTER = /(?!\p{ASCII})[\p{L}\p{M}\p{N}]/u;

const codePointLabel = (codePoint: number, count = 1): string => `[U+${codePoint.toString(16).toUpperCase().padStart(4, '0')}${count > 1 ? `×${count}` : ''}]`;
const labelCache = new Map<number | string, string>();
const labelOf = (character: string): string => cached(labelCache, character, () => codePointLabel(character.codePointAt(0) ?? 0));

/** A character that shows nothing by itself: a line break mark, a space for a tab, or its label. */
function visibleCharacter(character: string, count: number): string {
  const codePoint = character.codePointAt(0) ?? 0;
  if (character === '\n' || character === '\r') return LINE_BREAK_MARK.repeat(count);
  switch (getCategory(codePoint)) {
    case 'Zl': // U+2028 line separator
    case 'Zp': // U+2029 paragraph separator
      return LINE_BREAK_MARK.repeat(count);
    case 'Cc': // C0/C1 controls: tab, vertical tab, form feed, NEL, escape…
      return character === '\t' ? ' '.repeat(count) : codePointLabel(codePoint, count);
    default:
      // Cf (bidi controls, zero width characters, soft hyphen…), Co, Cn, and the blanks above.
      return codePointLabel(codePoint, count);
  }
}

// A long value repeats its characters: these caches spare most lookups and normalisations.
const CACHE_SIZE = 4096;
function cached<T>(cache: Map<number | string, T>, key: number | string, compute: () => T): T {
  let value = cache.get(key);
  if (value === undefined) {
    if (cache.size >= CACHE_SIZE) cache.clear();
    value = compute();
    cache.set(key, value);
  }
  return value;
}
const scriptCache = new Map<number | string, string>();
const scriptOf = (codePoint: number): string => cached(scriptCache, codePoint, () => getScript(codePoint));

// Per mark, whether it strikes through (overlay) or encloses its letter.
const overlayCache = new Map<number | string, boolean>();
const drawsOverItsLetter = (codePoint: number): boolean =>
  cached(overlayCache, codePoint, () => getCategory(codePoint) === 'Me' || getCombiningClass(codePoint) === 'Overlay');

/** The character just before `offset`: the letter a run of combining marks sits on. */
function characterBefore(text: string, offset: number): string | undefined {
  if (offset === 0) return undefined;
  const last = text.charCodeAt(offset - 1);
  const pair = offset >= 2 && last >= 0xdc00 && last <= 0xdfff && text.charCodeAt(offset - 2) >= 0xd800 && text.charCodeAt(offset - 2) <= 0xdbff;
  return text.slice(pair ? offset - 2 : offset - 1, offset);
}

/**
 * A run of combining marks, with those that change what their letter looks like beyond an accent
 * shown as labels: overlays (strike-through U+0336, slashes), enclosing marks (a keycap excepted),
 * marks NFC cannot fold into a Latin, Greek or Cyrillic letter or that hang off a space or
 * punctuation, and stacks of more than four. One variation selector after a character is an emoji
 * or ideograph variant, not a mark to show. The letter itself is left as it is.
 */
function visibleMarks(marks: string, offset: number, text: string): string {
  const base = characterBefore(text, offset);
  const script = base === undefined ? 'Common' : scriptOf(base.codePointAt(0) ?? 0);
  const original = [...marks];
  // A stack covers the lines around it whatever its marks are: every one of them is shown.
  if (original.length > MAX_MARKS_ON_ONE_LETTER + 1) return original.map((mark) => labelOf(mark)).join('');
  // The common case in scripts written with marks (Devanagari, Hebrew, Thai…): a few ordinary ones.
  if (
    !PRECOMPOSED_SCRIPTS.has(script) &&
    original.length <= MAX_MARKS_ON_ONE_LETTER &&
    !original.some((mark) => drawsOverItsLetter(mark.codePointAt(0) ?? 0))
  ) {
    return marks;
  }
  const leftOver = [...`${base ?? ''}${marks}`.normalize('NFC')].slice(base === undefined ? 0 : 1);
  const stacked = leftOver.length > MAX_MARKS_ON_ONE_LETTER;
  const shown = (mark: string, index: number): boolean => {
    const codePoint = mark.codePointAt(0) ?? 0;
    if (index === 0 && VARIATION_SELECTOR.test(mark)) return false;
    if (codePoint === 0x20e3 && base !== undefined && KEYCAP_BASE.test(base)) return false;
    return stacked || PRECOMPOSED_SCRIPTS.has(script) || drawsOverItsLetter(codePoint);
  };
  const toLabel = leftOver.filter(shown);
  if (toLabel.length === 0) return marks;
  // Of equal marks NFC folds the first into the letter, so the ones left over are the last ones.
  const visible: string[] = [];
  for (const mark of original.reverse()) {
    const index = toLabel.indexOf(mark);
    if (index >= 0) toLabel.splice(index, 1);
    visible.push(index >= 0 ? labelOf(mark) : mark);
  }
  return visible.reverse().join('');
}

/** The scripts one word is written in, Common and Inherited (digits, punctuation, accents) aside. */
function scriptsOf(word: string): Set<string> {
  const scripts = new Set<string>();
  for (const character of word) {
    const script = scriptOf(character.codePointAt(0) ?? 0);
    if (script === 'Common' || script === 'Inherited' || script === 'Unknown') continue;
    scripts.add(HAN_FAMILY.has(script) ? 'Han' : script);
  }
  return scripts;
}

/** What the words of `text` warn of: the scripts of the first that mixes several, the ASCII words others pass for (three at most). */
function wordWarnings(text: string): { scripts: string[] | null; alike: string[] } {
  let mixed: string[] | null = null;
  const alike = new Set<string>();
  for (const word of text.match(WORD) ?? []) {
    if (ASCII.test(word)) continue;
    if (mixed === null) {
      const scripts = scriptsOf(word);
      if (scripts.size > 1) mixed = [...scripts].sort();
    }
    if (alike.size < 3) {
      const reading = latinLookAlike(word);
      if (reading !== null) alike.add(reading);
    }
    if (mixed !== null && alike.size === 3) break;
  }
  return { scripts: mixed, alike: [...alike] };
}

/** The scripts of the first word that mixes several ("Аcme": Cyrillic and Latin), or null. */
export const mixedScripts = (text: string): string[] | null => wordWarnings(text).scripts;

/**
 * The UTS 39 skeleton of `text`: NFD, each code point replaced by its confusables.txt prototype, NFD
 * again. Two strings with the same skeleton look alike ("АСМЕ" and "ACME" both give "ACME").
 */
export function confusableSkeleton(text: string): string {
  let mapped = '';
  for (const character of text.normalize('NFD')) mapped += CONFUSABLE_PROTOTYPES.get(character) ?? character;
  return mapped.normalize('NFD');
}

/** The plain ASCII a character passes for, if it passes for one: fullwidth and styled letters, then UTS 39. */
function asciiReading(character: string): string | null {
  return ASCII.test(character) ? character : cached(readingCache, character, () => readingOf(character));
}
const readingCache = new Map<number | string, string | null>();

function readingOf(character: string): string | null {
  const compatible = character.normalize('NFKC');
  if (/^\p{L}|^\p{Nd}/u.test(character) && ASCII_ALPHANUMERIC.test(compatible)) return compatible;
  const skeleton = confusableSkeleton(character);
  if (!ASCII_ALPHANUMERIC.test(skeleton)) return null;
  // UTS 39's prototype of a capital I is a small l; a reader expects the capital.
  return skeleton === 'l' && getCategory(character.codePointAt(0) ?? 0) === 'Lu' ? 'I' : skeleton;
}

/**
 * The ASCII word a non-ASCII word passes for ("АСМЕ" → "ACME", "ＡＣＭＥ" → "ACME", "𝐩𝐚𝐲" → "pay"),
 * or null. A word mixing scripts is reported as such instead; a Latin word with accents has none.
 */
export function latinLookAlike(word: string): string | null {
  if (ASCII.test(word)) return null;
  let reading = '';
  for (const character of word) {
    const ascii = asciiReading(character);
    if (ascii === null) return null;
    reading += ascii;
  }
  return ASCII_ALPHANUMERIC.test(reading) && scriptsOf(word).size <= 1 ? reading : null;
}

/** Line breaks, controls, invisible and blank characters (runs counted), then suspicious marks. */
function visibleText(text: string): string {
  const visible = text.replace(INVISIBLE_OR_BREAKING, (run: string, character: string | undefined, offset: number) => {
    if (character === undefined) return LINE_BREAK_MARK; // \r\n
    const joinsEmoji = run === '\u200D' && AFTER_PICTOGRAPH.test(text.slice(Math.max(0, offset - 8), offset)) && BEFORE_PICTOGRAPH.test(text.slice(offset + 1));
    return joinsEmoji ? run : visibleCharacter(character, run.length / character.length);
  });
  return visible.replace(MARK_RUN, visibleMarks);
}

/**
 * `text` as one visible value: line breaks as ⏎; controls, invisible format characters, non-ASCII
 * blanks and suspicious combining marks as `[U+202E]` (a run as `[U+2800×12]`); a warning after a
 * word that mixes scripts, and after one that passes for a different ASCII word.
 */
export function displaySafe(text: string): string {
  const visible = visibleText(text);
  // Only a word with a non-ASCII letter, digit or mark can mix scripts or pass for another word.
  if (!NON_ASCII_WORD_CHARACTER.test(visible)) return visible;
  const { scripts, alike } = wordWarnings(visible);
  const mixedWarning = scripts ? ` [⚠ mixed scripts: ${scripts.join(' + ')}]` : '';
  const alikeWarning = alike.length > 0 ? ` [⚠ look-alike of ${alike.map((word) => `“${word}”`).join(', ')}]` : '';
  return `${visible}${mixedWarning}${alikeWarning}`;
}

/** A JSON value with every string in it (keys too) made display-safe: params and results in the console. */
export function displaySafeJson(value: unknown): unknown {
  if (typeof value === 'string') return displaySafe(value);
  if (Array.isArray(value)) return value.map(displaySafeJson);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [displaySafe(key), displaySafeJson(inner)]));
  }
  return value;
}

// The first use builds the Unicode property tables behind these regular expressions and lookups,
// which can take longer than a summary's whole render budget: pay for it at start instead.
displaySafe('warm\u200D\n\u0410a 👩\u200D💻 \u0410\u0421 \uFF21 A\u0336 \u2800\u2800');
