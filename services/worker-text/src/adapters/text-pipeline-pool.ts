import { existsSync } from 'node:fs';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inSpan, recordFinishedSpan } from '@tamp/kit';
import type { TextOperation } from '@tamp/proto';
import { Piscina } from 'piscina';
import type { TextPipelineResult } from '../domain/pipeline';
import type { TextPipelineOutcome, TextPipelineTask } from './text-pipeline-thread';

/** Runs the text pipeline off the caller's thread; rejects once `signal` aborts. */
export type RunTextPipeline = (
  text: string,
  operations: readonly TextOperation[],
  signal: AbortSignal,
) => Promise<TextPipelineResult>;

export interface TextPipelinePool {
  run: RunTextPipeline;
  /** Ends every thread at once; work still in the pool is rejected. */
  close(): Promise<void>;
}

/**
 * Threads above the first one end after this long idle: a burst reuses warm threads (each
 * loads the o200k tables, ~1 s and ~80 MB), a quiet worker gives the memory back.
 */
const IDLE_THREAD_TIMEOUT_MS = 60_000;

/**
 * The thread entry sits next to this module with this module's extension: `.ts` when run
 * from source (`node --import tsx`, vitest), `.js` when compiled. A bundler must emit it as
 * an entry point of its own at the same relative path.
 */
const THREAD_ENTRY = new URL(
  `./text-pipeline-thread${extname(fileURLToPath(import.meta.url))}`,
  import.meta.url,
);

/**
 * Compiled JavaScript threads inherit the process' execArgv as they are. TypeScript ones need
 * tsx of their own: vitest transforms the main thread without a Node loader, so threads would
 * not get one; under `node --import tsx` they inherit it and a second registration is harmless.
 */
function threadExecArgv(entry: URL): string[] | undefined {
  if (!entry.pathname.endsWith('.ts')) return undefined;
  return [...process.execArgv, '--import', import.meta.resolve('tsx')];
}

/**
 * A pool of up to `threads` worker threads for the text pipeline, so a multi-second job
 * (5 M characters) leaves the event loop free for lease heartbeats, NATS pings, inline
 * requests and health checks. Resolves once the first thread has loaded the pipeline: a
 * broken thread entry fails the service's start, not its first job.
 */
export async function startTextPipelinePool(options: {
  threads: number;
}): Promise<TextPipelinePool> {
  if (!existsSync(THREAD_ENTRY)) {
    throw new Error(`The text pipeline thread entry ${fileURLToPath(THREAD_ENTRY)} is missing`);
  }
  const piscina = new Piscina<TextPipelineTask, TextPipelineOutcome>({
    filename: THREAD_ENTRY.href,
    execArgv: threadExecArgv(THREAD_ENTRY),
    minThreads: 1,
    maxThreads: options.threads,
    idleTimeout: IDLE_THREAD_TIMEOUT_MS,
  });
  try {
    const warmUp = await piscina.run({ text: '', operations: [] });
    if (!('result' in warmUp)) throw warmUp.error;
  } catch (error) {
    await piscina.destroy();
    throw new Error('The text pipeline threads could not start', { cause: error });
  }
  return {
    // An abort while the task runs terminates its thread (piscina replaces it), so a timed-out
    // or handed-back job stops using a CPU at once.
    // An aborted task has no steps to show: its thread ended mid-step.
    run: (text, operations, signal) =>
      inSpan(
        'text pipeline',
        { attributes: { 'text.operations': operations.map((operation) => operation.type) } },
        async (span) => {
          const outcome = await piscina.run({ text, operations }, { signal });
          recordStepSpans(outcome);
          if (!('result' in outcome)) throw outcome.error;
          span.setAttributes({
            'text.tokens_in': outcome.result.tokensIn,
            'text.tokens_out': outcome.result.tokensOut,
          });
          return outcome.result;
        },
      ),
    close: () => piscina.destroy(),
  };
}

/**
 * The steps a thread timed, as children of the active `text pipeline` span: the thread has no
 * trace context, so the spans are made here, afterwards, with the times the steps really ran.
 * The failed step, if any, carries the pipeline's error.
 */
function recordStepSpans(outcome: TextPipelineOutcome): void {
  // The threads' readings of the process' monotonic clock, put on the wall clock the way the SDK
  // times its own spans: `Date.now()` now, minus how long ago each reading was.
  const nowNs = process.hrtime.bigint();
  const nowMs = Date.now();
  const epochMs = (monotonicNs: bigint) => nowMs - Number(nowNs - monotonicNs) / 1e6;
  for (const step of outcome.steps) {
    recordFinishedSpan({
      name: step.name,
      attributes: step.attributes,
      startTime: epochMs(step.startedAt),
      endTime: epochMs(step.endedAt),
      ...(step.failed && 'error' in outcome ? { error: outcome.error } : {}),
    });
  }
}
