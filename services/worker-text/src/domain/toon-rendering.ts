import { isDeepStrictEqual } from 'node:util';
import { decode, encode } from '@toon-format/toon';
import { parseFenceOpening } from './markdown-structure';
import { countTokens } from './tokens';

/** TOON's three delimiters; the cheapest in tokens wins, commas on a tie. */
const DELIMITERS = [',', '\t', '|'] as const;
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Above this size, delimiters are ranked by the tokens of a sample, scaled to the full
 * length, and only the chosen rendering is counted in full: counting several megabytes of
 * TOON three times costs seconds, and the three renderings differ only in their separators.
 */
const RANKING_SAMPLE_CHARS = 50_000;

function estimatedTokens(text: string): number {
  if (text.length <= RANKING_SAMPLE_CHARS) return countTokens(text);
  const sample = text.slice(0, RANKING_SAMPLE_CHARS);
  return (countTokens(sample) * text.length) / sample.length;
}

function decodesTo(toon: string, value: unknown): boolean {
  try {
    return isDeepStrictEqual(decode(toon), value);
  } catch {
    return false;
  }
}

/**
 * The cheapest TOON rendering of `value` that decodes back to exactly the same value, with
 * its token count, or undefined when none does.
 */
export function cheapestExactToon(value: unknown): { text: string; tokens: number } | undefined {
  const candidates: { text: string; rank: number }[] = [];
  for (const delimiter of DELIMITERS) {
    let text: string;
    try {
      text = encode(value, { delimiter });
    } catch {
      continue; // e.g. nesting deeper than the encoder's stack
    }
    if (text.trim() === '' || LONE_SURROGATE.test(text) || looksLikeFence(text)) continue;
    candidates.push({ text, rank: estimatedTokens(text) });
  }
  candidates.sort((a, b) => a.rank - b.rank);
  const best = candidates.find((candidate) => decodesTo(candidate.text, value));
  return best && { text: best.text, tokens: countTokens(best.text) };
}

/**
 * A TOON line that looks like a Markdown fence (a row holding just "```") would end the
 * surrounding fence or turn the following prose into code; such renderings are not used.
 */
function looksLikeFence(toon: string): boolean {
  if (!toon.includes('```') && !toon.includes('~~~')) return false;
  return toon.split('\n').some((line) => parseFenceOpening(line) !== undefined);
}
