import { classifyLines, splitInlineCode } from './markdown-structure';
import {
  asciiPunctuation,
  collapseSpaceRuns,
  composeCanonical,
  foldCompatibilityForms,
  removeInvisibles,
  shortenFillerRuns,
  unifySpaces,
} from './prose-cleanups';

export interface TrimBand {
  /** Lowest intensity of the band (inclusive). */
  readonly from: number;
  /** Highest intensity of the band (inclusive). */
  readonly to: number;
  /** Cleanups this band adds on top of every lower band. */
  readonly changes: readonly string[];
}

/**
 * The trim intensity bands. Each band applies its own changes plus those of all lower bands.
 * Code is never rewritten: fenced code blocks and inline code spans only lose trailing
 * whitespace at line ends, and leading indentation is kept on every line.
 */
export const TRIM_BANDS: readonly TrimBand[] = [
  {
    from: 0,
    to: 19,
    changes: [
      'Line endings normalized to LF (CRLF and lone CR).',
      'Trailing whitespace removed at the end of every line, code included.',
      'Blank lines at the start and end of the text removed.',
    ],
  },
  {
    from: 20,
    to: 39,
    changes: [
      'Runs of blank lines collapsed to one blank line.',
      'Runs of spaces inside a line collapsed to one space (leading indentation and tabs are kept).',
    ],
  },
  {
    from: 40,
    to: 59,
    changes: [
      'No-break and other Unicode spaces, form feeds and vertical tabs turned into plain spaces.',
      'Invisible characters removed: zero-width spaces, word joiners, byte-order marks, soft hyphens, direction marks and controls, control characters. A zero-width joiner is kept between letters and inside emoji; zero-width non-joiners are always kept.',
    ],
  },
  {
    from: 60,
    to: 79,
    changes: [
      'Full-width and half-width forms and mathematical letters and digits folded to their plain form (e.g. "Ａ１" to "A1", "𝐁" to "B").',
      'Accented letters composed (Unicode NFC) where that does not lengthen the text.',
      'Typographic punctuation to ASCII: curly quotes and primes, hyphens, en dashes and minus signs, em dashes between spaces.',
    ],
  },
  {
    from: 80,
    to: 100,
    changes: [
      'All blank lines outside code blocks removed.',
      'Runs of four or more dots, hyphens, equals signs or underscores shortened to three (dot leaders, rulers).',
    ],
  },
];

/** Index into TRIM_BANDS; each step below is enabled from a given band up. */
const BAND = { minimal: 0, light: 1, invisible: 2, normalize: 3, aggressive: 4 } as const;

export function trimBandIndex(intensity: number): number {
  if (!Number.isFinite(intensity) || intensity < 0 || intensity > 100) {
    throw new RangeError(`trim intensity must be between 0 and 100, got ${intensity}`);
  }
  let index = 0;
  TRIM_BANDS.forEach((band, i) => {
    if (intensity >= band.from) index = i;
  });
  return index;
}

const TRAILING_WHITESPACE = /[ \t\f\v\u00A0\u1680\u2000-\u200A\u202F\u205F\u3000]+$/;

function stripTrailingWhitespace(line: string): string {
  return line.replace(TRAILING_WHITESPACE, '');
}

function cleanProseText(text: string, band: number, before: string, after: string): string {
  let out = text;
  if (band >= BAND.invisible) out = unifySpaces(removeInvisibles(out, before, after));
  if (band >= BAND.normalize) {
    out = asciiPunctuation(composeCanonical(foldCompatibilityForms(out)), before);
  }
  if (band >= BAND.aggressive) out = shortenFillerRuns(out);
  if (band >= BAND.light) out = collapseSpaceRuns(out);
  return out;
}

function cleanProseLine(line: string, band: number): string {
  if (band === BAND.minimal) return stripTrailingWhitespace(line);
  const indentation = /^[ \t]*/.exec(line)?.[0] ?? '';
  const pieces = splitInlineCode(line.slice(indentation.length));
  const cleaned = pieces.map((piece, i) => {
    if (piece.code) return piece.text;
    const before = pieces[i - 1]?.code ? '`' : '';
    const after = pieces[i + 1]?.code ? '`' : '';
    return cleanProseText(piece.text, band, before, after);
  });
  return stripTrailingWhitespace(indentation + cleaned.join(''));
}

/**
 * Cleans whitespace, punctuation and Unicode in `text` without changing its meaning: every
 * word, number and emoji stays, in order. `intensity` (0-100) selects a band of TRIM_BANDS.
 * The result is idempotent, and a higher intensity never gives a longer result.
 */
export function trimText(text: string, intensity: number): string {
  const band = trimBandIndex(intensity);
  const lines = text.split(/\r\n|\r|\n/);
  const kinds = classifyLines(lines);
  const blankLinesKept = band >= BAND.aggressive ? 0 : band >= BAND.light ? 1 : Infinity;

  const output: string[] = [];
  let pendingBlankLines = 0;
  lines.forEach((line, i) => {
    const prose = kinds[i] === 'prose';
    const cleaned = prose ? cleanProseLine(line, band) : stripTrailingWhitespace(line);
    if (prose && cleaned === '') {
      pendingBlankLines++;
      return;
    }
    // Blank lines before the first kept line are dropped: output.length is still 0.
    if (output.length > 0) {
      for (let n = Math.min(pendingBlankLines, blankLinesKept); n > 0; n--) output.push('');
    }
    pendingBlankLines = 0;
    output.push(cleaned);
  });
  // Blank lines at the end (including those of an unclosed code block) are dropped.
  while (output.length > 0 && output[output.length - 1] === '') output.pop();
  return output.join('\n');
}
