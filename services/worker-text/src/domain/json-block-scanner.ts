/**
 * Finds JSON objects and arrays embedded in prose: balanced {…} / […] spans, respecting
 * strings and escapes, that the caller's parser accepts.
 *
 * The scan gives up at the first character that cannot occur in JSON outside a string, so
 * ordinary prose ("[see above]", "{name}") is rejected after a few characters. When a
 * balanced span is not valid JSON, or the brackets never balance, the complete inner spans
 * met on the way are tried instead (to a bounded depth), so one broken outer bracket does not
 * hide valid JSON inside it; everything is scanned once, which keeps large texts linear.
 */

export interface EmbeddedJson<T> {
  readonly start: number;
  /** Exclusive. */
  readonly end: number;
  readonly value: T;
}

/** Returns the parsed block, or undefined when the span is not an acceptable JSON block. */
export type BlockParser<T> = (start: number, end: number) => T | undefined;

/** How many levels of nested spans are tried inside a span that failed. */
const MAX_FALLBACK_DEPTH = 8;

const CODE = {
  quote: 0x22,
  backslash: 0x5c,
  openBrace: 0x7b,
  closeBrace: 0x7d,
  openBracket: 0x5b,
  closeBracket: 0x5d,
} as const;

/** Characters JSON allows outside strings (besides quotes and brackets). */
const OUTSIDE_STRING = new Set(
  [...' \t\n\r0123456789-+.eE:,truefalsn'].map((c) => c.charCodeAt(0)),
);

interface InnerSpan {
  readonly start: number;
  readonly end: number;
  readonly depth: number;
}

interface ScanResult {
  /** Exclusive end of the balanced span, if the brackets balanced. */
  readonly end: number | undefined;
  /** Where scanning stopped (the end when balanced). */
  readonly stoppedAt: number;
  readonly inner: InnerSpan[];
}

function scanBalanced(text: string, start: number, limit: number): ScanResult {
  const openers: number[] = [];
  const inner: InnerSpan[] = [];
  const stop = (at: number): ScanResult => ({ end: undefined, stoppedAt: at, inner });
  let i = start;
  while (i < limit) {
    const code = text.charCodeAt(i);
    if (code === CODE.quote) {
      i++;
      while (i < limit) {
        const c = text.charCodeAt(i);
        if (c === CODE.quote) break;
        if (c < 0x20) return stop(i); // raw control characters (and line breaks) end a string attempt
        i += c === CODE.backslash ? 2 : 1;
      }
      if (i >= limit) return stop(limit);
      i++;
    } else if (code === CODE.openBrace || code === CODE.openBracket) {
      openers.push(i);
      i++;
    } else if (code === CODE.closeBrace || code === CODE.closeBracket) {
      const open = openers.pop();
      const expected = code === CODE.closeBrace ? CODE.openBrace : CODE.openBracket;
      if (open === undefined || text.charCodeAt(open) !== expected) return stop(i);
      i++;
      if (openers.length === 0) return { end: i, stoppedAt: i, inner };
      inner.push({ start: open, end: i, depth: openers.length });
    } else if (OUTSIDE_STRING.has(code)) {
      i++;
    } else {
      return stop(i);
    }
  }
  return stop(limit);
}

function nextOpener(text: string, from: number, limit: number): number {
  for (let i = from; i < limit; i++) {
    const code = text.charCodeAt(i);
    if (code === CODE.openBrace || code === CODE.openBracket) return i;
  }
  return -1;
}

/** Tries the inner spans of a failed scan, outermost first, skipping those inside a hit. */
function innerBlocks<T>(spans: InnerSpan[], parse: BlockParser<T>): EmbeddedJson<T>[] {
  const found: EmbeddedJson<T>[] = [];
  let coveredUntil = -1;
  const byStart = [...spans].sort((a, b) => a.start - b.start);
  for (const span of byStart) {
    if (span.start < coveredUntil || span.depth > MAX_FALLBACK_DEPTH) continue;
    const value = parse(span.start, span.end);
    if (value !== undefined) {
      found.push({ start: span.start, end: span.end, value });
      coveredUntil = span.end;
    }
  }
  return found;
}

/** Finds JSON blocks in text[from, to), in order and without overlaps. */
export function findEmbeddedJson<T>(
  text: string,
  parse: BlockParser<T>,
  from = 0,
  to = text.length,
): EmbeddedJson<T>[] {
  const found: EmbeddedJson<T>[] = [];
  let position = from;
  while (position < to) {
    const start = nextOpener(text, position, to);
    if (start < 0) break;
    const scan = scanBalanced(text, start, to);
    const value = scan.end === undefined ? undefined : parse(start, scan.end);
    if (scan.end !== undefined && value !== undefined) {
      found.push({ start, end: scan.end, value });
    } else {
      found.push(...innerBlocks(scan.inner, parse));
    }
    // Openers before the stop either closed (and were tried as inner spans) or would stop at
    // the same character, so scanning resumes after it.
    position = scan.end ?? scan.stoppedAt + 1;
  }
  return found;
}
