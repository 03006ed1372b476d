import { getCategory, getScript } from 'unicode-properties';

/**
 * Agent-chosen text (a param value) shown to a human deciding on it must read as one value: it must
 * not start new lines that look like twokey's own ("Cost: $1.00", "Approved by security ✅"), reorder
 * itself with bidi controls, hide characters, or pass a Cyrillic "А" off as a Latin "A".
 */

/** Shown in place of a line break inside a value. */
export const LINE_BREAK_MARK = '⏎';

// Scripts that legitimately mix inside one word (UTS 39's Japanese, Korean and Chinese sets).
const HAN_FAMILY = new Set(['Han', 'Hiragana', 'Katakana', 'Hangul', 'Bopomofo']);
// A zero width joiner between two pictographs builds one emoji (👩‍💻); anywhere else it hides.
const AFTER_PICTOGRAPH = /\p{Extended_Pictographic}[\p{Emoji_Modifier}\uFE0F]*$/u;
const BEFORE_PICTOGRAPH = /^\p{Extended_Pictographic}/u;

const INVISIBLE_OR_BREAKING = /\r\n|[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/gu;
const WORD = /[\p{L}\p{M}\p{N}]+/gu;

const codePointLabel = (codePoint: number): string => `[U+${codePoint.toString(16).toUpperCase().padStart(4, '0')}]`;

function visibleCharacter(character: string): string {
  const codePoint = character.codePointAt(0) ?? 0;
  if (character === '\r\n' || character === '\n' || character === '\r') return LINE_BREAK_MARK;
  switch (getCategory(codePoint)) {
    case 'Zl': // U+2028 line separator
    case 'Zp': // U+2029 paragraph separator
      return LINE_BREAK_MARK;
    case 'Cc': // C0/C1 controls: tab, vertical tab, form feed, NEL, escape…
      return character === '\t' ? ' ' : codePointLabel(codePoint);
    case 'Cf': // bidi overrides and isolates, zero width space/joiners, soft hyphen, BOM…
    case 'Co': // private use: nothing a reader could recognise
    case 'Cn': // unassigned
      return codePointLabel(codePoint);
    default:
      return character;
  }
}

/** The scripts one word is written in, Common and Inherited (digits, punctuation, accents) aside. */
function scriptsOf(word: string): Set<string> {
  const scripts = new Set<string>();
  for (const character of word) {
    const script = getScript(character.codePointAt(0) ?? 0);
    if (script === 'Common' || script === 'Inherited' || script === 'Unknown') continue;
    scripts.add(HAN_FAMILY.has(script) ? 'Han' : script);
  }
  return scripts;
}

/** The scripts of the first word that mixes several ("Аcme": Cyrillic and Latin), or null. */
export function mixedScripts(text: string): string[] | null {
  for (const word of text.match(WORD) ?? []) {
    const scripts = scriptsOf(word);
    if (scripts.size > 1) return [...scripts].sort();
  }
  return null;
}

/**
 * `text` as one visible value: line breaks as ⏎, controls and invisible format characters as
 * `[U+202E]`, and a warning after a word that mixes scripts.
 */
export function displaySafe(text: string): string {
  const visible = text.replace(INVISIBLE_OR_BREAKING, (character: string, offset: number) => {
    const joinsEmoji =
      character === '\u200D' && AFTER_PICTOGRAPH.test(text.slice(Math.max(0, offset - 8), offset)) && BEFORE_PICTOGRAPH.test(text.slice(offset + 1));
    return joinsEmoji ? character : visibleCharacter(character);
  });
  const scripts = mixedScripts(visible);
  return scripts ? `${visible} [⚠ mixed scripts: ${scripts.join(' + ')}]` : visible;
}

// The first use builds the Unicode property tables behind these regular expressions and lookups,
// which can take longer than a summary's whole render budget: pay for it at start instead.
displaySafe('warm\u200D\n\u0410a 👩\u200D💻');
