/**
 * Character-level cleanups applied by trim to prose (never to code). Every function here is
 * idempotent and never makes a string longer, neither in UTF-16 code units nor in UTF-8
 * bytes; trim's idempotence and monotonicity rest on those two properties.
 */

/**
 * Characters that may sit on either side of a zero-width joiner that must survive: letters
 * and marks (joiners shape Indic and Arabic scripts) and emoji parts (ZWJ sequences such as
 * families, professions or the rainbow flag): pictographs, keycap bases, regional indicators,
 * skin tones, hair components and tags. A joiner is not joinable itself, otherwise a pair of
 * stray joiners would protect each other on one pass and not on the next.
 */
const JOINABLE = String.raw`\p{L}\p{M}\p{Extended_Pictographic}#*0-9\u{1F1E6}-\u{1F1FF}\u{1F3FB}-\u{1F3FF}\u{1F9B0}-\u{1F9B3}\u{E0020}-\u{E007F}`;

/**
 * Invisible characters removed by trim: zero-width space, word joiner, byte-order mark,
 * soft hyphen, direction marks, embeddings, overrides and isolates, invisible math
 * operators, and C0/C1 control characters other than tab and line breaks. A zero-width
 * joiner is removed only when it does not join two joinable characters. Characters next to
 * a backtick or tilde are kept, so that runs of them never merge into a new code span or
 * fence on the next pass.
 */
const INVISIBLE = new RegExp(
  String.raw`(?<![\x60~])(?:[\u200B\u2060\uFEFF\u00AD\u200E\u200F\u202A-\u202E\u2066-\u2069\u2061-\u2064\u0000-\u0008\u000E-\u001F\u007F-\u0084\u0086-\u009F]|(?<![${JOINABLE}])\u200D|\u200D(?![${JOINABLE}]))(?![\x60~])`,
  'gu',
);

/**
 * Removes invisible characters. `before` and `after` are the characters just outside the
 * text (e.g. the backtick of an adjacent code span), which the neighbour rules look at.
 */
export function removeInvisibles(text: string, before = '', after = ''): string {
  const padded = before + text + after;
  const cleaned = padded.replace(INVISIBLE, '');
  return cleaned.slice(before.length, cleaned.length - after.length);
}

/** No-break, fixed-width and other Unicode spaces, plus form feed and vertical tab. */
const UNICODE_SPACE = /[\u00A0\u1680\u2000-\u200A\u202F\u205F\f\v]/g;

export function unifySpaces(text: string): string {
  return text.replace(UNICODE_SPACE, ' ');
}

export function collapseSpaceRuns(text: string): string {
  return text.replace(/ {2,}/g, ' ');
}

const utf8 = new TextEncoder();

function notLonger(candidate: string, original: string): boolean {
  return (
    candidate.length <= original.length &&
    utf8.encode(candidate).length <= utf8.encode(original).length
  );
}

/**
 * Full-width and half-width forms (minus the grave accent and tilde, which would create code
 * spans or fences) and mathematical alphanumeric symbols. Ligatures such as "ﬁ" are not in
 * the list: expanding them makes the text longer.
 */
const COMPATIBILITY_FORM = /[\uFF01-\uFF3F\uFF41-\uFF5D\uFF5F-\uFFEE\u{1D400}-\u{1D7FF}]/gu;
const CODE_MARKERS = /[`~]/;
const compatibilityCache = new Map<string, string>();

function foldCompatibilityCharacter(char: string): string {
  let folded = compatibilityCache.get(char);
  if (folded === undefined) {
    const nfkc = char.normalize('NFKC');
    folded = notLonger(nfkc, char) && !CODE_MARKERS.test(nfkc) ? nfkc : char;
    compatibilityCache.set(char, folded);
  }
  return folded;
}

export function foldCompatibilityForms(text: string): string {
  return text.replace(COMPATIBILITY_FORM, foldCompatibilityCharacter);
}

/**
 * Units that canonical composition works on: a base character with its combining marks
 * (whitespace is no base: a no-break space before a mark may become indentation, and the
 * result must not depend on where the indentation ends),
 * Hangul jamo sequences (with the marks after them, which NFC may reorder), and single
 * non-ASCII characters (singleton decompositions).
 */
const COMPOSITION_UNIT =
  /[\u1100-\u115F]+[\u1160-\u11A7]+[\u11A8-\u11FF]*\p{M}*|[\uAC00-\uD7A3][\u11A8-\u11FF]+\p{M}*|[^\p{M}\s]\p{M}+|[\u0080-\u{10FFFF}]/gu;
/**
 * Left as written: emoji (NFC never changes them, but they are not worth any risk) and CJK
 * compatibility ideographs, which NFC maps to unified ideographs although some of them are
 * used as distinct variants.
 */
const COMPOSITION_EXEMPT =
  /[\p{Extended_Pictographic}\p{Regional_Indicator}\uF900-\uFAFF\u{2F800}-\u{2FA1F}]/u;

function composeUnit(unit: string): string {
  if (COMPOSITION_EXEMPT.test(unit)) return unit;
  const composed = unit.normalize('NFC');
  if (composed === unit || CODE_MARKERS.test(composed)) return unit;
  // A few compositions (e.g. U+0958) expand; those are skipped to keep trim monotonic.
  return notLonger(composed, unit) ? composed : unit;
}

/** Canonical composition (NFC) wherever it does not lengthen the text. */
export function composeCanonical(text: string): string {
  if (text.normalize('NFC') === text) return text;
  return text.replace(COMPOSITION_UNIT, composeUnit);
}

/**
 * Typographic punctuation with a one-character ASCII equivalent. Em dashes are rewritten
 * only between words and spaces ("a — b" reads the same as "a - b"), not when attached
 * ("left—forever" would turn into the compound "left-forever") and not at the start of a line
 * (where "- " would start a list). The end of the text (after any whitespace) counts as a
 * space because trailing whitespace is trimmed away, and the result must not depend on it. The ellipsis is kept: "..." is longer.
 */
export function asciiPunctuation(text: string, before = ''): string {
  return (before + text)
    .replace(/[\u2018\u2019\u201A\u201B\u2032]/g, "'")
    .replace(/[\u201C\u201D\u201E\u201F\u2033]/g, '"')
    .replace(/[\u2010-\u2013\u2212]/g, '-')
    .replace(/(?<=[^ \t] +)[\u2014\u2015](?= |[ \t\u3000]*$)/g, '-')
    .slice(before.length);
}

/** Dot leaders, rulers and blanks ("Intro ........ 5", "=====", "Name: ______"). */
export function shortenFillerRuns(text: string): string {
  return text.replace(/([.\-=_])\1{3,}/g, '$1$1$1');
}
