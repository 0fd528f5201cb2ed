/** Line bookkeeping over the original text, for edits that must leave the rest byte for byte. */

export interface Line {
  readonly start: number;
  /** End of the line's content, before its terminator. */
  readonly end: number;
  /** "\n", "\r\n", "\r" or "" for the last line. */
  readonly terminator: string;
}

export function splitLinesWithOffsets(text: string): Line[] {
  const lines: Line[] = [];
  const breaks = /\r\n|\r|\n/g;
  let start = 0;
  for (const match of text.matchAll(breaks)) {
    lines.push({ start, end: match.index, terminator: match[0] });
    start = match.index + match[0].length;
  }
  lines.push({ start, end: text.length, terminator: '' });
  return lines;
}

/** Start of the line holding `position`. */
export function lineStartBefore(text: string, position: number): number {
  let i = position;
  while (i > 0 && text[i - 1] !== '\n' && text[i - 1] !== '\r') i--;
  return i;
}

/** End of the line holding `position`, before its terminator. */
export function lineEndAfter(text: string, position: number): number {
  let i = position;
  while (i < text.length && text[i] !== '\n' && text[i] !== '\r') i++;
  return i;
}
