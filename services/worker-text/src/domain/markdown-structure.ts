/**
 * Just enough Markdown structure for the text operations to leave code alone: fenced code
 * blocks (``` and ~~~) and inline code spans.
 *
 * Fence detection is deliberately more tolerant than CommonMark: any mix of whitespace,
 * invisible format characters, control characters and blockquote markers may precede the fence. Trim removes
 * or rewrites exactly those characters in prose lines, so a tolerant detector guarantees
 * that trimming can never turn a prose line into a fence on a second pass (idempotence),
 * and the only cost is treating a few odd lines as code, which keeps them untouched.
 */

export type LineKind = 'prose' | 'fence-open' | 'code' | 'fence-close';

export interface FenceOpening {
  /** Everything before the fence characters (indentation, blockquote markers). */
  readonly prefix: string;
  /** The run of fence characters, e.g. "```" or "~~~~". */
  readonly marker: string;
  /** The info string after the marker, as written (may carry trailing whitespace). */
  readonly info: string;
}

const FENCE_OPEN = /^([\s\p{Cf}\p{Cc}>]*)(?:(`{3,})([^`]*)|(~{3,})(.*))$/u;
const FENCE_CLOSE = /^[\s\p{Cf}\p{Cc}>]*(`{3,}|~{3,})[\s\p{Cf}\p{Cc}]*$/u;

export function parseFenceOpening(line: string): FenceOpening | undefined {
  const match = FENCE_OPEN.exec(line);
  if (!match) return undefined;
  const marker = match[2] ?? match[4] ?? '';
  const info = match[3] ?? match[5] ?? '';
  return { prefix: match[1] ?? '', marker, info };
}

function closesFence(line: string, opening: FenceOpening): boolean {
  const match = FENCE_CLOSE.exec(line);
  const marker = match?.[1];
  return (
    marker !== undefined &&
    marker[0] === opening.marker[0] &&
    marker.length >= opening.marker.length
  );
}

/** Classifies every line; an unclosed fence runs to the end of the text, as in CommonMark. */
export function classifyLines(lines: readonly string[]): LineKind[] {
  const kinds: LineKind[] = [];
  let open: FenceOpening | undefined;
  for (const line of lines) {
    if (open) {
      if (closesFence(line, open)) {
        kinds.push('fence-close');
        open = undefined;
      } else {
        kinds.push('code');
      }
      continue;
    }
    // Cheap pre-check: most prose lines contain neither fence character.
    const opening = line.includes('`') || line.includes('~') ? parseFenceOpening(line) : undefined;
    if (opening) {
      kinds.push('fence-open');
      open = opening;
    } else {
      kinds.push('prose');
    }
  }
  return kinds;
}

export interface LinePiece {
  /** True for an inline code span, backticks included. */
  readonly code: boolean;
  readonly text: string;
}

/**
 * Splits one line into prose and inline code spans. As in CommonMark, a run of N backticks
 * opens a span that the next run of exactly N backticks closes; a run without partner is
 * literal text. Spans are only recognised within a single line.
 */
export function splitInlineCode(line: string): LinePiece[] {
  if (!line.includes('`')) return [{ code: false, text: line }];
  const runs = [...line.matchAll(/`+/g)].map((m) => ({ start: m.index, length: m[0].length }));
  // For each run, the index of the next run with the same length (computed right to left so
  // the whole split stays linear even on lines full of backticks).
  const nextSameLength = new Array<number>(runs.length).fill(-1);
  const lastSeen = new Map<number, number>();
  for (let k = runs.length - 1; k >= 0; k--) {
    const run = runs[k]!;
    nextSameLength[k] = lastSeen.get(run.length) ?? -1;
    lastSeen.set(run.length, k);
  }
  const pieces: LinePiece[] = [];
  let textStart = 0;
  let k = 0;
  while (k < runs.length) {
    const open = runs[k]!;
    const partner = nextSameLength[k]!;
    if (partner < 0) {
      k++;
      continue;
    }
    const close = runs[partner]!;
    if (open.start > textStart)
      pieces.push({ code: false, text: line.slice(textStart, open.start) });
    const end = close.start + close.length;
    pieces.push({ code: true, text: line.slice(open.start, end) });
    textStart = end;
    k = partner + 1;
  }
  if (textStart < line.length || pieces.length === 0) {
    pieces.push({ code: false, text: line.slice(textStart) });
  }
  return pieces;
}
