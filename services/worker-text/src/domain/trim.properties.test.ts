import { describe, expect, it } from 'vitest';
import {
  generateCharacterSoup,
  generateDocument,
  seededRandom,
} from '../../test/support/random-document';
import { TRIM_BANDS, trimText } from './trim';

/** Intensities at both edges of every band, plus the preset values. */
const INTENSITIES = [0, 19, 20, 30, 39, 40, 50, 59, 60, 70, 79, 80, 100];

const utf8 = new TextEncoder();
const bytes = (text: string) => utf8.encode(text).length;

// \p{RGI_Emoji} needs the `v` flag: Node 20 has it, the ES2023 type target does not know it.
const SET_NOTATION: string = 'gv';
/**
 * The comparison view of a text: invisible format and control characters outside emoji are
 * dropped (trim removes them, and a zero-width space inside a word splits it visually only).
 */
const EMOJI_OR_INVISIBLE = new RegExp(
  String.raw`((?=\p{Emoji})\p{RGI_Emoji})|[[\p{Cf}\p{Cc}]--[\t\n\r\f\v]]`,
  SET_NOTATION,
);
const MEANING_TOKEN = new RegExp(
  String.raw`((?=\p{Emoji})\p{RGI_Emoji})|([\p{L}\p{M}\p{N}]+)`,
  SET_NOTATION,
);

function visible(text: string): string {
  return text.replace(EMOJI_OR_INVISIBLE, (_match, emoji: string | undefined) => emoji ?? '');
}

/** Words (compared after NFKC, trim's documented folding is a subset of it) and emoji. */
function meaningTokens(text: string): { words: string[]; emoji: string[] } {
  const words: string[] = [];
  const emoji: string[] = [];
  for (const match of visible(text).matchAll(MEANING_TOKEN)) {
    if (match[1] !== undefined) emoji.push(match[1]);
    else words.push((match[2] ?? '').normalize('NFKC'));
  }
  return { words, emoji };
}

/**
 * Every numeric character in order. Only full-width and mathematical digits may change (to
 * their ASCII digit); superscripts, fractions, circled and non-Latin digits must stay as they are.
 */
function numericCharacters(text: string): string[] {
  return [...visible(text).matchAll(/\p{N}/gu)].map(([char]) => {
    const code = char.codePointAt(0) ?? 0;
    if (code >= 0xff10 && code <= 0xff19) return String(code - 0xff10);
    if (code >= 0x1d7ce && code <= 0x1d7ff) return String((code - 0x1d7ce) % 10);
    return char;
  });
}

const DOCUMENTS = Array.from({ length: 250 }, (_, seed) =>
  generateDocument(seededRandom(seed + 1)),
);
const HOSTILE_DOCUMENTS = Array.from(
  { length: 150 },
  (_, seed) => generateDocument(seededRandom(10_000 + seed), { strayMarkers: true }).text,
);
const SOUPS = Array.from({ length: 400 }, (_, seed) =>
  generateCharacterSoup(seededRandom(20_000 + seed)),
);
const ALL_TEXTS = [...DOCUMENTS.map((d) => d.text), ...HOSTILE_DOCUMENTS, ...SOUPS];

describe('trimText properties over generated documents', () => {
  it('keeps every word and emoji in order, and numbers digit for digit', () => {
    for (const text of [...DOCUMENTS.map((d) => d.text), ...HOSTILE_DOCUMENTS]) {
      const expected = meaningTokens(text);
      const expectedNumbers = numericCharacters(text);
      for (const intensity of INTENSITIES) {
        const out = trimText(text, intensity);
        const actual = meaningTokens(out);
        expect(actual.emoji, `emoji at ${intensity} for ${JSON.stringify(text)}`).toEqual(
          expected.emoji,
        );
        expect(actual.words, `words at ${intensity} for ${JSON.stringify(text)}`).toEqual(
          expected.words,
        );
        expect(numericCharacters(out), `numbers at ${intensity}`).toEqual(expectedNumbers);
      }
    }
  });

  it('keeps fenced code blocks byte for byte except trailing whitespace, and inline code spans', () => {
    let blocksChecked = 0;
    for (const doc of DOCUMENTS) {
      for (const intensity of INTENSITIES) {
        const out = trimText(doc.text, intensity);
        for (const block of doc.codeBlocks) expect(out).toContain(block);
        for (const span of doc.codeSpans) expect(out).toContain(span);
        blocksChecked += doc.codeBlocks.length;
      }
    }
    expect(blocksChecked).toBeGreaterThan(500);
  });

  it('is idempotent at every intensity', () => {
    for (const text of ALL_TEXTS) {
      for (const intensity of INTENSITIES) {
        const once = trimText(text, intensity);
        expect(trimText(once, intensity), `${intensity}: ${JSON.stringify(text)}`).toBe(once);
      }
    }
  });

  it('never gives a longer result at a higher intensity, in code units and in UTF-8 bytes', () => {
    for (const text of ALL_TEXTS) {
      const outputs = INTENSITIES.map((intensity) => trimText(text, intensity));
      for (let i = 1; i < outputs.length; i++) {
        const lower = outputs[i - 1]!;
        const higher = outputs[i]!;
        const context = `${INTENSITIES[i - 1]} -> ${INTENSITIES[i]}: ${JSON.stringify(text)}`;
        expect(higher.length, context).toBeLessThanOrEqual(lower.length);
        expect(bytes(higher), context).toBeLessThanOrEqual(bytes(lower));
      }
      expect(outputs[0]!.length).toBeLessThanOrEqual(text.length);
    }
  });

  it('a higher band applied to a lower band result equals the higher band applied directly', () => {
    // This absorption property is what makes the bands nested; monotonicity follows from it.
    const representatives = TRIM_BANDS.map((band) => band.from);
    for (const text of ALL_TEXTS) {
      for (const low of representatives) {
        const lowResult = trimText(text, low);
        for (const high of representatives.filter((h) => h > low)) {
          expect(trimText(lowResult, high), `${low} then ${high}: ${JSON.stringify(text)}`).toBe(
            trimText(text, high),
          );
        }
      }
    }
  });

  it('actually shrinks the generated documents, more at higher bands', () => {
    const total = (intensity: number) =>
      DOCUMENTS.reduce((sum, doc) => sum + bytes(trimText(doc.text, intensity)), 0);
    const input = DOCUMENTS.reduce((sum, doc) => sum + bytes(doc.text), 0);
    const sizes = TRIM_BANDS.map((band) => total(band.from));
    expect(sizes[0]).toBeLessThan(input);
    for (let i = 1; i < sizes.length; i++) expect(sizes[i]).toBeLessThan(sizes[i - 1]!);
  });
});
