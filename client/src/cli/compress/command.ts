import { relative, resolve } from 'node:path';
import type { Tamp } from '../../client';
import type { RetryEvent } from '../../http';
import { describeFailure, EXIT } from '../failures';
import { duration } from '../format';
import {
  type Display,
  LineDisplay,
  SilentDisplay,
  summaryTable,
  TerminalDisplay,
  totalsOf,
} from './display';
import { parseChoices, planFiles } from './plan';
import { runCompress } from './run';
import { StateFile } from './state';

export interface CompressFlags {
  preset: string[];
  ops?: string;
  out: string;
  concurrency: number;
  json: boolean;
  force: boolean;
  progress: boolean;
}

/** `tamp compress`: plan, run with a display, then the summary; returns the exit code. */
export async function compressCommand(
  inputs: string[],
  flags: CompressFlags,
  connect: (onRetry: (event: RetryEvent) => void) => Tamp,
): Promise<number> {
  const plan = await planFiles(inputs, {
    out: flags.out,
    choices: parseChoices(flags.preset, flags.ops),
  });
  const out = resolve(flags.out);
  const display: Display = flags.json
    ? new SilentDisplay()
    : process.stderr.isTTY && flags.progress
      ? new TerminalDisplay(plan.files)
      : new LineDisplay();
  const tamp = connect((event) => display.retry(event));
  const state = await StateFile.open(out);
  const interrupt = new AbortController();
  const onSignal = () => {
    if (interrupt.signal.aborted) process.exit(EXIT.interrupted);
    interrupt.abort(new Error('interrupted'));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const startedAt = performance.now();
  let result: Awaited<ReturnType<typeof runCompress>>;
  try {
    result = await runCompress(plan.files, {
      tamp,
      state,
      out,
      concurrency: flags.concurrency,
      force: flags.force,
      interrupt: interrupt.signal,
      observer: display,
    });
  } finally {
    display.stop();
    await state.close();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  const { outcomes, fatal } = result;
  const totals = totalsOf(outcomes, performance.now() - startedAt);
  const fatalFailure = fatal === undefined ? undefined : describeFailure(fatal, tamp.baseUrl);

  if (flags.json) {
    const files = outcomes.map((outcome) => ({
      source: outcome.file.display,
      output: outcome.file.output,
      pipeline: outcome.file.pipeline,
      status: outcome.status,
      resumed: outcome.resumed,
      jobId: outcome.jobId ?? null,
      inputSize: outcome.inputSize ?? null,
      outputSize: outcome.outputSize ?? null,
      ratio: outcome.ratio ?? null,
      ms: Math.round(outcome.ms),
      error: outcome.failure
        ? { code: outcome.failure.code ?? null, message: outcome.failure.message }
        : null,
    }));
    process.stdout.write(
      `${JSON.stringify({ files, totals: { ...totals, ms: Math.round(totals.ms) } }, null, 2)}\n`,
    );
  } else if (totals.skipped === totals.files) {
    process.stdout.write(
      `Nothing to do: all ${totals.files} files are already compressed in ${relative(process.cwd(), out) || '.'} ` +
        `(see ${relative(process.cwd(), state.path)}); --force compresses them again.\n`,
    );
  } else {
    process.stdout.write(`${summaryTable(outcomes, totals)}\n`);
    if (plan.ignored.length > 0) {
      process.stderr.write(`note: ${plan.ignored.length} files of other types were left out\n`);
    }
  }
  if (fatalFailure !== undefined) {
    process.stderr.write(`error: ${fatalFailure.message}\n`);
    if (fatalFailure.hint !== undefined) process.stderr.write(`hint: ${fatalFailure.hint}\n`);
    return fatalFailure.exitCode;
  }
  if (interrupt.signal.aborted) {
    if (!flags.json) {
      process.stderr.write(
        `interrupted after ${duration(totals.ms)}: run the same command again to resume (nothing is sent or charged twice)\n`,
      );
    }
    return EXIT.interrupted;
  }
  return totals.failed > 0 ? EXIT.failed : EXIT.ok;
}
