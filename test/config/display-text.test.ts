import { describe, expect, it } from 'vitest';
import { confusableSkeleton, displaySafe, displaySafeJson, latinLookAlike } from '../../src/config/display-text.js';

describe('UTS 39 look-alikes', () => {
  it('gives "АСМЕ" (Cyrillic) and "ACME" one skeleton, and "acme" another', () => {
    expect(confusableSkeleton('\u0410\u0421\u041C\u0415')).toBe(confusableSkeleton('ACME'));
    expect(confusableSkeleton('paypal')).toBe(confusableSkeleton('p\u0430yp\u0430l'));
    expect(confusableSkeleton('acme')).not.toBe(confusableSkeleton('ACME'));
  });

  it.each([
    ['\u0410\u0421\u041C\u0415', 'ACME'], // Cyrillic
    ['\u0391\u0392\u0395', 'ABE'], // Greek
    ['\u0406\u0412\u041C', 'IBM'], // UTS 39's prototype of I is l; the reading keeps the capital
    ['\uFF41\uFF43\uFF4D\uFF45', 'acme'], // fullwidth
    ['\uD835\uDC00\uD835\uDC02\uD835\uDC0C\uD835\uDC04', 'ACME'], // mathematical bold
    ['\uFF11\uFF10\uFF10', '100'], // fullwidth digits
    ['\uFB01le', 'file'], // a ligature
  ])('reads %s as the ASCII word %s', (word, ascii) => {
    expect(latinLookAlike(word)).toBe(ascii);
    expect(displaySafe(`to ${word}`)).toBe(`to ${word} [⚠ look-alike of “${ascii}”]`);
  });

  it.each([['ACME'], ['100'], ['café'], ['cafe\u0301'], ['Москва'], ['東京'], ['١٠٠'], ['x²']])(
    'leaves %s alone: it is ASCII, or passes for no ASCII word',
    (word) => {
      expect(latinLookAlike(word)).toBeNull();
      expect(displaySafe(word)).toBe(word);
    },
  );

  it('reports a word mixing scripts as mixed, once, and lists at most three look-alikes', () => {
    expect(displaySafe('p\u0430ypal')).toBe('p\u0430ypal [⚠ mixed scripts: Cyrillic + Latin]');
    expect(displaySafe('\u0410\u0421 \u0412\u0415 \u0422\u041E \u041D\u0415 \u0410\u0421')).toBe(
      '\u0410\u0421 \u0412\u0415 \u0422\u041E \u041D\u0415 \u0410\u0421 [⚠ look-alike of “AC”, “BE”, “TO”]',
    );
  });
});

describe('blanks, invisible characters and marks', () => {
  it('shows a run of one blank as one label with its count', () => {
    expect(displaySafe('pay\u2800\u2800\u2800\u2800\u2800\u2800 acme')).toBe('pay[U+2800×6] acme');
    expect(displaySafe('a\u3000\u3000b\u3164c\uFFA0d')).toBe('a[U+3000×2]b[U+3164]c[U+FFA0]d');
    expect(displaySafe('10\u00A0000\u202F€')).toBe('10[U+00A0]000[U+202F]€');
    expect(displaySafe('x\u200B\u200B\u200By')).toBe('x[U+200B×3]y');
    expect(displaySafe('a\u034Fb')).toBe('a[U+034F]b');
  });

  it('keeps line breaks and tabs readable: ⏎ each, a space each', () => {
    expect(displaySafe('a\n\nb\r\nc\u2028d\te\t\tf')).toBe('a⏎⏎b⏎c⏎d e  f');
  });

  it('labels strike-through and other overlays, stacks, and marks on nothing', () => {
    expect(displaySafe('A\u0336C\u0336M\u0336E\u0336')).toBe('A[U+0336]C[U+0336]M[U+0336]E[U+0336]');
    expect(displaySafe('o\u0338k')).toBe('o[U+0338]k');
    expect(displaySafe('9\u20DD')).toBe('9[U+20DD]');
    expect(displaySafe(' \u0301x')).toBe(' [U+0301]x');
    expect(displaySafe('ก\u0E34\u0E34\u0E34\u0E34\u0E34')).toBe('ก[U+0E34][U+0E34][U+0E34][U+0E34][U+0E34]');
  });

  it('keeps accents, scripts written with marks, emoji variants and keycaps', () => {
    for (const text of ['Việt', 'Vie\u0323\u0302t', 'नमस्ते', 'שָׁלוֹם', 'مَرْحَبًا', 'ที่นี่', '❤\uFE0F', '#\uFE0F\u20E3', '👩\u200D💻', '葛\u{E0100}']) {
      expect(displaySafe(text)).toBe(text);
    }
  });

  it('shows a run of variation selectors (data hidden in an emoji) as labels', () => {
    expect(displaySafe('😀\uFE00\uFE01\uFE02')).toBe('😀\uFE00[U+FE01][U+FE02]');
  });
});

describe('displaySafeJson', () => {
  it('makes every string of a value display-safe, keys included, and keeps the rest as it is', () => {
    expect(displaySafeJson({ to: '\u0410\u0421\u041C\u0415', n: 1, list: ['a\nb', null, true], 'k\u202E': { deep: 'x\u2800\u2800' } })).toEqual({
      to: 'АСМЕ [⚠ look-alike of “ACME”]',
      n: 1,
      list: ['a⏎b', null, true],
      'k[U+202E]': { deep: 'x[U+2800×2]' },
    });
  });
});
