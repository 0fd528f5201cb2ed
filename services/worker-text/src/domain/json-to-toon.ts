import { JSON_TO_TOON_THRESHOLDS } from '@tamp/proto';
import { parseFaithfulJson } from './faithful-json';
import { findEmbeddedJson } from './json-block-scanner';
import { classifyLines, parseFenceOpening, splitInlineCode } from './markdown-structure';
import { type Line, lineEndAfter, lineStartBefore, splitLinesWithOffsets } from './text-lines';
import { countTokens } from './tokens';
import { cheapestExactToon } from './toon-rendering';

export interface ToonConversion {
  readonly text: string;
  /** JSON blocks rewritten as TOON. */
  readonly blocksConverted: number;
  /** JSON blocks left as they were because TOON would not have been cheaper (or not exact). */
  readonly blocksSkipped: number;
}

interface Replacement {
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

type Outcome =
  | { readonly converted: true; readonly replacement: Replacement }
  | { readonly converted: false };

const SKIPPED: Outcome = { converted: false };

function isNonEmptyContainer(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  return value !== null && typeof value === 'object' && Object.keys(value).length > 0;
}

/**
 * In prose, brackets are common ("[1]", "[ ]", "{}"), so only structured data counts as a
 * JSON block there: an object with keys, or an array holding objects or arrays.
 */
function isStructuredBlock(value: unknown): boolean {
  if (Array.isArray(value)) return value.some((item) => item !== null && typeof item === 'object');
  return isNonEmptyContainer(value);
}

function indentLines(text: string, indentation: string, skipFirst: boolean): string {
  return text
    .split('\n')
    .map((line, i) => (skipFirst && i === 0 ? line : indentation + line))
    .join('\n');
}

/** How far around a replacement its token cost is measured (see decideBlock). */
const CONTEXT_CHARS = 256;

/**
 * Decides one block. `frame` turns the TOON text into the exact replacement for
 * text[start, end). The block is converted only when it is large and TOON saves enough tokens
 * against compact JSON (worthConverting: the rule users are promised), and the replacement,
 * measured together with the text around it (tokens merge across the seams), costs fewer
 * tokens than what it replaces.
 */
function decideBlock(
  text: string,
  start: number,
  end: number,
  value: unknown,
  frame: (toon: string) => string,
): Outcome {
  const toon = cheapestExactToon(value);
  if (!toon || !worthConverting(countTokens(JSON.stringify(value)), toon.tokens)) return SKIPPED;
  const replacement = frame(toon.text);
  const before = text.slice(
    Math.max(lineStartBefore(text, start) - 1, start - CONTEXT_CHARS, 0),
    start,
  );
  const after = text.slice(end, Math.min(lineEndAfter(text, end) + 1, end + CONTEXT_CHARS));
  const tokensNow = countTokens(before + text.slice(start, end) + after);
  if (countTokens(before + replacement + after) >= tokensNow) return SKIPPED;
  return { converted: true, replacement: { start, end, text: replacement } };
}

/** The contract's "large blocks" and "a saving that matters" (see JSON_TO_TOON_THRESHOLDS). */
export function worthConverting(jsonTokens: number, toonTokens: number): boolean {
  const { minBlockTokens, minSavedTokens, minSavedShare } = JSON_TO_TOON_THRESHOLDS;
  const saved = jsonTokens - toonTokens;
  return (
    jsonTokens >= minBlockTokens && saved >= minSavedTokens && saved >= minSavedShare * jsonTokens
  );
}

const JSON_FENCE_LABELS = new Set(['', 'json']);

function decideFencedBlock(
  text: string,
  lines: Line[],
  openIndex: number,
  closeIndex: number,
): Outcome | undefined {
  const openLine = lines[openIndex]!;
  const closeLine = lines[closeIndex]!;
  const opening = parseFenceOpening(text.slice(openLine.start, openLine.end));
  const label = opening?.info.trim().split(/\s+/)[0]?.toLowerCase() ?? '';
  if (!opening || !JSON_FENCE_LABELS.has(label)) return undefined;
  const bodyStart = openLine.end + openLine.terminator.length;
  const body = text.slice(bodyStart, closeLine.start);
  const parsed = parseFaithfulJson(body.trim());
  if (!parsed.ok || !isNonEmptyContainer(parsed.value)) return undefined;
  const indentation = /^[ \t]*$/.test(opening.prefix) ? opening.prefix : '';
  const newline = openLine.terminator;
  return decideBlock(text, openLine.start, closeLine.end, parsed.value, (toon) =>
    [
      `${opening.prefix}${opening.marker}toon`,
      indentLines(toon, indentation, false),
      text.slice(closeLine.start, closeLine.end),
    ].join(newline),
  );
}

/**
 * TOON is line- and indentation-based, so an embedded block is given lines of its own: in
 * place when it already stands alone on its lines, otherwise with line breaks around it.
 * Every TOON line gets the indentation of the line the block started on.
 */
function decideEmbeddedBlock(text: string, start: number, end: number, value: unknown): Outcome {
  const lineStart = lineStartBefore(text, start);
  const before = text.slice(lineStart, start);
  const after = text.slice(end, lineEndAfter(text, end));
  const indentation = /^[ \t]*/.exec(before)?.[0] ?? '';
  const proseBefore = before.trim() !== '';
  const proseAfter = after.trim() !== '';
  const replaceFrom = proseBefore ? start - (/[ \t]*$/.exec(before)?.[0].length ?? 0) : start;
  const replaceTo = proseAfter ? end + (/^[ \t]*/.exec(after)?.[0].length ?? 0) : end;
  return decideBlock(text, replaceFrom, replaceTo, value, (toon) => {
    const body = indentLines(toon, indentation, !proseBefore);
    return `${proseBefore ? '\n' : ''}${body}${proseAfter ? `\n${indentation}` : ''}`;
  });
}

/** [start, end) ranges of the inline code spans in a run of prose lines, in order. */
function inlineCodeRanges(text: string, lines: readonly Line[]): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  for (const line of lines) {
    let offset = line.start;
    for (const piece of splitInlineCode(text.slice(line.start, line.end))) {
      if (piece.code) ranges.push([offset, offset + piece.text.length]);
      offset += piece.text.length;
    }
  }
  return ranges;
}

function isWithinOneRange(
  ranges: ReadonlyArray<[number, number]>,
  start: number,
  end: number,
): boolean {
  let low = 0;
  let high = ranges.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const [rangeStart, rangeEnd] = ranges[middle]!;
    if (start < rangeStart) high = middle - 1;
    else if (start >= rangeEnd) low = middle + 1;
    else return end <= rangeEnd;
  }
  return false;
}

/**
 * Embedded blocks in a run of prose lines. JSON inside an inline code span is left alone;
 * the spans are not cut out before scanning because backticks inside JSON strings would
 * pair up into bogus spans and split a block.
 */
function decideProse(
  text: string,
  lines: readonly Line[],
  record: (outcome: Outcome) => void,
): void {
  const first = lines[0];
  const last = lines.at(-1);
  if (!first || !last) return;
  const codeRanges = inlineCodeRanges(text, lines);
  const parseBlock = (start: number, end: number): unknown => {
    if (isWithinOneRange(codeRanges, start, end)) return undefined;
    const parsed = parseFaithfulJson(text.slice(start, end));
    return parsed.ok && isStructuredBlock(parsed.value) ? parsed.value : undefined;
  };
  for (const block of findEmbeddedJson(text, parseBlock, first.start, last.end)) {
    record(decideEmbeddedBlock(text, block.start, block.end, block.value));
  }
}

function applyReplacements(text: string, replacements: readonly Replacement[]): string {
  const ordered = [...replacements].sort((a, b) => a.start - b.start);
  const parts: string[] = [];
  let position = 0;
  for (const replacement of ordered) {
    parts.push(text.slice(position, replacement.start), replacement.text);
    position = replacement.end;
  }
  parts.push(text.slice(position));
  return parts.join('');
}

/**
 * Rewrites JSON blocks as TOON where that saves tokens: the whole text when it is JSON,
 * fenced blocks labelled `json` or unlabelled whose content is JSON (re-fenced as `toon`),
 * and JSON objects/arrays embedded in prose. Anything else, including blocks that would not
 * get cheaper, is left exactly as it was. Every converted block decodes back to the same value.
 */
export function convertJsonBlocksToToon(text: string): ToonConversion {
  const trimmed = text.trim();
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    const parsed = parseFaithfulJson(trimmed);
    if (parsed.ok && isNonEmptyContainer(parsed.value)) {
      const outcome = decideBlock(text, 0, text.length, parsed.value, (toon) => toon);
      return outcome.converted
        ? { text: outcome.replacement.text, blocksConverted: 1, blocksSkipped: 0 }
        : { text, blocksConverted: 0, blocksSkipped: 1 };
    }
  }

  const replacements: Replacement[] = [];
  let blocksConverted = 0;
  let blocksSkipped = 0;
  const record = (outcome: Outcome) => {
    if (outcome.converted) {
      replacements.push(outcome.replacement);
      blocksConverted++;
    } else {
      blocksSkipped++;
    }
  };

  const lines = splitLinesWithOffsets(text);
  const kinds = classifyLines(lines.map((line) => text.slice(line.start, line.end)));
  let proseRun: Line[] = [];
  const flushProse = () => {
    if (proseRun.length > 0) decideProse(text, proseRun, record);
    proseRun = [];
  };
  for (let i = 0; i < lines.length; i++) {
    if (kinds[i] === 'prose') {
      proseRun.push(lines[i]!);
      continue;
    }
    flushProse();
    if (kinds[i] !== 'fence-open') continue;
    let close = i + 1;
    while (close < lines.length && kinds[close] !== 'fence-close') close++;
    if (close < lines.length) {
      const outcome = decideFencedBlock(text, lines, i, close);
      if (outcome) record(outcome);
    }
    i = close;
  }
  flushProse();

  return { text: applyReplacements(text, replacements), blocksConverted, blocksSkipped };
}
