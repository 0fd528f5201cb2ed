import type { JobMetrics, JobWorkMessage, Pipeline, UsageDimensions } from '@tamp/proto';
import type { Logger } from 'pino';

/** What a pipeline runner gets besides the work itself. */
export interface JobContext {
  /**
   * This job's private, empty directory, made on the first call (the same one on later calls)
   * and removed with everything in it afterwards. A job that never asks costs no folder: an
   * inline text job reads its input from the message and answers in the reply.
   */
  workspace: () => Promise<string>;
  /** Fires when the job must stop: shutdown hand-back, job timeout, or a lost lease. */
  signal: AbortSignal;
  /**
   * Tells the runtime the job is making progress. Queued jobs extend their JetStream lease
   * (throttled); inline jobs ignore it. The runtime also extends the lease on a timer.
   */
  heartbeat: () => void;
  /** JetStream delivery count (queued) or 1 (inline). */
  attempt: number;
  /** `queued` for JOBS deliveries, `inline` for `work.<pipeline>.inline` requests. */
  mode: 'queued' | 'inline';
  logger: Logger;
}

/** What a finished job reports; exactly what `completeJob` and the inline reply carry. */
export interface JobOutcome {
  outputKey: string | null;
  outputText: string | null;
  metrics: JobMetrics;
  usage: UsageDimensions;
}

/** The work message of one pipeline. */
export type WorkOf<P extends Pipeline> = Extract<JobWorkMessage, { pipeline: P }>;

/** One pipeline's processing (`ProcessJob` alone: any pipeline's work). */
export type ProcessJob<P extends Pipeline = Pipeline> = (
  work: WorkOf<P>,
  context: JobContext,
) => Promise<JobOutcome>;

/**
 * A failure that no retry can fix (invalid input, image too large…). The processing cores
 * already flag their own errors with `permanent: true`; runners throw this one for problems
 * they find themselves. The message is written for API users: it becomes the job's `error`.
 */
export class PermanentJobError extends Error {
  readonly permanent = true;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'PermanentJobError';
  }
}

/** Whether retrying cannot help: the error (or its cause chain) says `permanent: true`. */
export function isPermanentError(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    if (typeof current !== 'object') return false;
    if ((current as { permanent?: unknown }).permanent === true) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** The job's `error` text: the error's own message, never a stack. */
export function describeError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.trim() === '' ? 'Processing failed' : message.slice(0, 1_000);
}
