import { inSpan, recordFinishedSpan } from '@tamp/kit';
import type { TextOperation } from '@tamp/proto';
import { Piscina } from 'piscina';
import type { TextPipelineResult } from '../domain/pipeline';
import type { TextPipelineOutcome, TextPipelineTask } from './text-pipeline-thread';
import { IDLE_THREAD_TIMEOUT_MS, threadEntryOptions } from './thread-entry';

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
 * A pool of up to `threads` worker threads for the text pipeline, so a multi-second job
 * (5 M characters) leaves the event loop free for lease heartbeats, NATS pings, inline
 * requests and health checks. Resolves once the first thread has loaded the pipeline: a
 * broken thread entry fails the service's start, not its first job.
 */
export async function startTextPipelinePool(options: {
  threads: number;
}): Promise<TextPipelinePool> {
  const piscina = new Piscina<TextPipelineTask, TextPipelineOutcome>({
    ...threadEntryOptions('text-pipeline-thread'),
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
