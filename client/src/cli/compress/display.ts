import { relative } from 'node:path';
import cliProgress from 'cli-progress';
import type { RetryEvent } from '../../http';
import { bytes, duration, painter, ratio, table } from '../format';
import type { PlannedFile } from './plan';
import type { FileOutcome, Phase, PhaseDetail, RunObserver } from './run';

export interface Display extends RunObserver {
  retry(event: RetryEvent): void;
  /** Ends live output; the summary is printed after. */
  stop(): void;
}

const PHASE_LABELS: Record<Phase, string> = {
  read: 'reading',
  upload: '↑ upload',
  create: '⚙ working',
  wait: '… waiting',
  download: '↓ download',
};

const BAR_WIDTH = 20;

interface FileBarPayload {
  kind: 'file';
  name: string;
  phase: Phase;
  status: string;
}

interface TotalBarPayload {
  kind: 'total';
  uploaded: number;
  downloaded: number;
  note: string;
}

/**
 * On a terminal: a bar per file in progress (bytes uploaded, the job's status while waiting,
 * bytes downloaded) under an overall bar; each finished file becomes a line above them.
 * Drawn on stderr, so stdout keeps only the summary.
 */
export class TerminalDisplay implements Display {
  private readonly bars = new Map<PlannedFile, cliProgress.SingleBar>();
  private readonly multibar: cliProgress.MultiBar;
  private readonly overall: cliProgress.SingleBar;
  private readonly uploaded = new Map<PlannedFile, number>();
  private readonly downloaded = new Map<PlannedFile, number>();
  private readonly paint = painter(process.stderr);
  private readonly nameWidth: number;
  private readonly startedAt = Date.now();

  constructor(files: readonly PlannedFile[], stream: NodeJS.WriteStream = process.stderr) {
    this.nameWidth = Math.min(28, Math.max(8, ...files.map((file) => file.display.length)));
    this.multibar = new cliProgress.MultiBar({
      stream,
      format: (_options, params, payload: FileBarPayload | TotalBarPayload) =>
        payload.kind === 'total'
          ? this.renderTotal(params, payload)
          : this.renderFile(params, payload),
      hideCursor: true,
      clearOnComplete: false,
      stopOnComplete: false,
      fps: 8,
      forceRedraw: true,
    });
    this.overall = this.multibar.create(files.length, 0, {
      kind: 'total',
      uploaded: 0,
      downloaded: 0,
      note: '',
    } satisfies TotalBarPayload);
  }

  phase(file: PlannedFile, phase: Phase, detail: PhaseDetail = {}): void {
    let bar = this.bars.get(file);
    const payload: FileBarPayload = {
      kind: 'file',
      name: file.display,
      phase,
      status: detail.status ?? '',
    };
    if (bar === undefined) {
      bar = this.multibar.create(1, 0, payload);
      this.bars.set(file, bar);
    }
    if (phase === 'upload' && detail.loaded !== undefined) this.uploaded.set(file, detail.loaded);
    if (phase === 'download' && detail.loaded !== undefined) {
      this.downloaded.set(file, detail.loaded);
    }
    const total = detail.total ?? (phase === 'wait' || phase === 'create' ? 1 : bar.getTotal());
    bar.setTotal(Math.max(1, total));
    bar.update(detail.loaded ?? 0, payload);
    this.overall.update(this.overall.getProgress() * this.overall.getTotal(), this.totals());
  }

  finished(outcome: FileOutcome): void {
    const bar = this.bars.get(outcome.file);
    if (bar !== undefined) {
      this.multibar.remove(bar);
      this.bars.delete(outcome.file);
    }
    this.overall.increment(1, this.totals());
    if (outcome.status !== 'skipped') this.multibar.log(`${this.line(outcome)}\n`);
  }

  retry(event: RetryEvent): void {
    const what = event.reason === 'network' ? 'no answer' : event.reason;
    this.overall.update(this.overall.getProgress() * this.overall.getTotal(), {
      ...this.totals(),
      note: `${what}; retrying in ${Math.ceil(event.delayMs / 1000)} s`,
    });
  }

  stop(): void {
    this.overall.update(this.overall.getTotal(), { ...this.totals(), note: '' });
    // A redraw first: it prints the lines logged since the last frame.
    this.multibar.update();
    this.multibar.stop();
  }

  private totals(): Omit<TotalBarPayload, 'note'> & { note?: string } {
    const sum = (values: Map<PlannedFile, number>) =>
      [...values.values()].reduce((total, value) => total + value, 0);
    return { kind: 'total', uploaded: sum(this.uploaded), downloaded: sum(this.downloaded) };
  }

  private renderFile(params: cliProgress.Params, payload: FileBarPayload): string {
    const name = fit(payload.name, this.nameWidth);
    const label = PHASE_LABELS[payload.phase].padEnd(10);
    if (payload.phase === 'upload' || payload.phase === 'download') {
      const percent = `${Math.floor(params.progress * 100)}%`.padStart(4);
      return `  ${name}  ${label} ${this.bar(params.progress)} ${percent}  ${bytes(params.value)} / ${bytes(params.total)}`;
    }
    const detail = payload.phase === 'wait' ? `job ${payload.status}` : '';
    return `  ${name}  ${label} ${this.paint('dim', '·'.repeat(BAR_WIDTH))}       ${detail}`;
  }

  private renderTotal(params: cliProgress.Params, payload: TotalBarPayload): string {
    const files = `${params.value}/${params.total} files`;
    const elapsed = duration(Date.now() - this.startedAt);
    const note = payload.note === '' ? '' : `  ${this.paint('yellow', payload.note)}`;
    // Elapsed time before the byte counts: on a narrow terminal the end of the line is cut.
    return `${this.paint('bold', fit('Total', this.nameWidth + 2))}  ${' '.repeat(10)} ${this.bar(params.progress)} ${files}  ${elapsed}  ↑ ${bytes(payload.uploaded)}  ↓ ${bytes(payload.downloaded)}${note}`;
  }

  private bar(progress: number): string {
    const filled = Math.round(Math.min(1, Math.max(0, progress)) * BAR_WIDTH);
    return (
      this.paint('cyan', '█'.repeat(filled)) + this.paint('dim', '░'.repeat(BAR_WIDTH - filled))
    );
  }

  private line(outcome: FileOutcome): string {
    return outcomeLine(outcome, this.paint);
  }
}

/** Not a terminal: one line per file as it finishes, nothing redrawn. */
export class LineDisplay implements Display {
  private lastRetryNote = 0;

  phase(): void {}

  finished(outcome: FileOutcome): void {
    process.stdout.write(`${outcomeLine(outcome)}\n`);
  }

  retry(event: RetryEvent): void {
    // Concurrent files hit a rate limit together: one note is enough.
    if (Date.now() - this.lastRetryNote < 5_000) return;
    this.lastRetryNote = Date.now();
    const what = event.reason === 'network' ? 'no answer' : event.reason;
    process.stderr.write(`retry  ${what}; retrying in ${Math.ceil(event.delayMs / 1000)} s\n`);
  }

  stop(): void {}
}

/** `--json`: nothing while running; the document at the end says everything. */
export class SilentDisplay implements Display {
  phase(): void {}
  finished(): void {}
  retry(): void {}
  stop(): void {}
}

const STATUS_WORDS: Record<FileOutcome['status'], string> = {
  done: 'done',
  skipped: 'skip',
  failed: 'FAIL',
  interrupted: 'stop',
  'not-started': 'skip',
};

/** With `paint`, for a terminal: a coloured mark first. Without, lines start with the word. */
function outcomeLine(
  outcome: FileOutcome,
  paint?: (format: Parameters<ReturnType<typeof painter>>[0], text: string) => string,
): string {
  const { file } = outcome;
  const mark = (format: Parameters<ReturnType<typeof painter>>[0], symbol: string) =>
    paint === undefined ? '' : `${paint(format, symbol)} `;
  const word = STATUS_WORDS[outcome.status].padEnd(5);
  const target = relative(process.cwd(), file.output) || file.output;
  switch (outcome.status) {
    case 'done':
      return `${mark('green', '✓')}${word}${file.display} → ${target}  ${bytes(outcome.inputSize)} → ${bytes(outcome.outputSize)}  ${ratio(outcome.ratio)}  ${duration(outcome.ms)}${outcome.resumed ? '  (resumed)' : ''}`;
    case 'skipped':
      return `${mark('dim', '–')}${word}${file.display} → ${target}  (already done)`;
    case 'failed':
      return `${mark('red', '✗')}${word}${file.display}  ${outcome.failure?.message ?? 'failed'}`;
    case 'interrupted':
      return `${mark('yellow', '■')}${word}${file.display}  (interrupted; run again to resume)`;
    case 'not-started':
      return `${mark('yellow', '■')}${word}${file.display}  (not started)`;
  }
}

function fit(text: string, width: number): string {
  return text.length > width ? `…${text.slice(text.length - width + 1)}` : text.padEnd(width);
}

export interface Totals {
  files: number;
  done: number;
  skipped: number;
  failed: number;
  interrupted: number;
  inputBytes: number;
  outputBytes: number;
  ratio: number | null;
  ms: number;
}

export function totalsOf(outcomes: readonly FileOutcome[], ms: number): Totals {
  const counted = outcomes.filter(
    (outcome) => outcome.status === 'done' || outcome.status === 'skipped',
  );
  const inputBytes = counted.reduce((sum, outcome) => sum + (outcome.inputSize ?? 0), 0);
  const outputBytes = counted.reduce((sum, outcome) => sum + (outcome.outputSize ?? 0), 0);
  const count = (status: FileOutcome['status']) =>
    outcomes.filter((outcome) => outcome.status === status).length;
  return {
    files: outcomes.length,
    done: count('done'),
    skipped: count('skipped'),
    failed: count('failed'),
    interrupted: count('interrupted') + count('not-started'),
    inputBytes,
    outputBytes,
    ratio: outputBytes > 0 ? Math.round((inputBytes / outputBytes) * 1000) / 1000 : null,
    ms,
  };
}

/** The summary table: one row per file, then the totals (bytes of done and skipped files). */
export function summaryTable(outcomes: readonly FileOutcome[], totals: Totals): string {
  const rows = outcomes.map((outcome) => [
    outcome.file.display,
    relative(process.cwd(), outcome.file.output) || outcome.file.output,
    bytes(outcome.inputSize),
    bytes(outcome.outputSize),
    ratio(outcome.ratio),
    outcome.status === 'skipped' ? '–' : duration(outcome.ms),
    outcome.status === 'done' && outcome.resumed ? 'done (resumed)' : outcome.status,
  ]);
  const counts = [
    `${totals.done} done`,
    ...(totals.skipped > 0 ? [`${totals.skipped} skipped`] : []),
    ...(totals.failed > 0 ? [`${totals.failed} failed`] : []),
    ...(totals.interrupted > 0 ? [`${totals.interrupted} not finished`] : []),
  ].join(', ');
  rows.push([
    `Total (${totals.files} ${totals.files === 1 ? 'file' : 'files'})`,
    '',
    bytes(totals.inputBytes),
    bytes(totals.outputBytes),
    ratio(totals.ratio ?? undefined),
    duration(totals.ms),
    counts,
  ]);
  return table(
    ['File', 'Output', 'Input', 'Output size', 'Ratio', 'Time', 'Result'],
    rows,
    [2, 3, 4, 5],
  );
}
