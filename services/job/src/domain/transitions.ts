import { type JobStatus, jitteredDelayMs, type RandomSource } from '@tamp/proto';
import { retryDelayMs } from './backoff';
import { isTerminal } from './job';

/**
 * The worker-facing part of the lifecycle (docs/decisions.md#lifecycle-and-attempts), as pure decisions over the
 * stored status and attempt count. `attempt` is JetStream's delivery count less the deliveries
 * workers handed back on shutdown (JobAttempts.handBack): it counts every other delivery,
 * including one whose worker died before or while running it, so a gap between the stored
 * attempt and the delivered one is a lost attempt and counts as a failed one.
 */
export interface AttemptState {
  status: JobStatus;
  attempts: number;
}

export type BeginDecision =
  /** Terminal already: ack, do nothing. */
  | { kind: 'skip' }
  /** A delivery older than the attempt that is running: leave the message to that one. */
  | { kind: 'superseded' }
  /** The same delivery asking again (e.g. a retried call): it is already running. */
  | { kind: 'resume' }
  /** Start attempt `attempt`; a `created` job is first claimed (`created → pending`). */
  | { kind: 'start'; attempt: number }
  /** No attempt is left: the job fails (and is refunded) with `error`. */
  | { kind: 'fail'; attempt: number; error: string };

export function decideBegin(
  job: AttemptState,
  attempt: number,
  maxAttempts: number,
): BeginDecision {
  if (isTerminal(job.status)) return { kind: 'skip' };
  if (job.status === 'processing') {
    if (attempt === job.attempts) return { kind: 'resume' };
    if (attempt < job.attempts) return { kind: 'superseded' };
  }
  // A `pending`/`created` job never goes back: a delivery number at or below the attempts
  // already made is a stale duplicate and simply gets the next number.
  const next = Math.max(attempt, job.attempts + 1);
  if (next > maxAttempts) {
    return {
      kind: 'fail',
      attempt: Math.min(next - 1, maxAttempts),
      error: `Processing stopped without a result; all ${maxAttempts} attempts are used`,
    };
  }
  return { kind: 'start', attempt: next };
}

export type FailureDecision =
  /** The job is terminal already; the report changes nothing. */
  | { kind: 'ignore' }
  /** This failure was already recorded (a retried call); the retry is due in `retryInMs`. */
  | { kind: 'recorded'; retryInMs: number }
  /** Back to `pending`; the worker retries after `delayMs` (the backoff, jittered). */
  | { kind: 'retry'; attempt: number; delayMs: number }
  /** Permanent failure or the last attempt: the job fails and is refunded. */
  | { kind: 'fail'; attempt: number };

export function decideFailure(
  job: AttemptState & { retryAt: Date | null },
  attempt: number,
  permanent: boolean,
  options: { maxAttempts: number; retryBaseMs: number; now: Date; random: RandomSource },
): FailureDecision {
  if (isTerminal(job.status)) return { kind: 'ignore' };
  if (job.status === 'pending' && attempt <= job.attempts) {
    const due = job.retryAt === null ? 0 : job.retryAt.getTime() - options.now.getTime();
    return { kind: 'recorded', retryInMs: Math.max(0, Math.round(due)) };
  }
  const failed = Math.max(attempt, job.attempts);
  if (permanent || failed >= options.maxAttempts) return { kind: 'fail', attempt: failed };
  // Equal jitter (proto's backoff.ts): between half the backoff and all of it, so the jobs of
  // one failing burst do not all come back at the same moment, and never later than documented.
  const delayMs = jitteredDelayMs(retryDelayMs(options.retryBaseMs, failed), options.random);
  return { kind: 'retry', attempt: failed, delayMs };
}

/** Which states may complete: a running attempt, or a late success of an attempt given up on. */
export function mayComplete(status: JobStatus): boolean {
  return status === 'processing' || status === 'pending';
}
