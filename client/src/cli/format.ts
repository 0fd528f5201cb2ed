import { styleText } from 'node:util';
import Table from 'cli-table3';
import prettyBytes from 'pretty-bytes';

export function bytes(value: number | undefined): string {
  return value === undefined ? '–' : prettyBytes(value);
}

export function duration(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)} m ${String(seconds % 60).padStart(2, '0')} s`;
}

export function ratio(value: number | undefined): string {
  return value === undefined ? '–' : `${value.toFixed(value >= 10 ? 1 : 2)}×`;
}

/** Colours only where a person reads a terminal (and NO_COLOR is unset). */
export function painter(stream: NodeJS.WriteStream) {
  const enabled = stream.isTTY === true && process.env.NO_COLOR === undefined;
  return (format: Parameters<typeof styleText>[0], text: string) =>
    enabled ? styleText(format, text) : text;
}

/** A plain box table (cli-table3) without colours, readable in a terminal and in a log. */
export function table(head: string[], rows: string[][], alignRight: readonly number[] = []) {
  const output = new Table({
    head,
    style: { head: [], border: [], compact: true },
    colAligns: head.map((_, index) => (alignRight.includes(index) ? 'right' : 'left')),
  });
  output.push(...rows);
  return output.toString();
}
