import type { Logger } from '@tamp/kit';
import {
  type JobMetrics,
  type JobWorkMessage,
  LIMITS,
  type RandomSource,
  ServiceError,
  type UsageDimensions,
  withCompressionRatio,
} from '@tamp/proto';
import type { JobRepository } from '../adapters/job-repository';
import { jobWorkOf } from '../domain/events';
import { type JobDocument, resultExpiryHourOf } from '../domain/job';
import { decideBegin, decideFailure, mayComplete } from '../domain/transitions';
import type { Settlement } from './settlement';

/**
 * How often one job may be handed back without using an attempt (rolling deploys, storage or
 * another dependency failing under it). Generous: a day of deploys and outages.
 */
const MAX_HAND_BACKS = 50;

/** A decision lost to a concurrent change is re-made on the new state, a few times at most. */
const CONTENTION_ROUNDS = 5;

/**
 * The job's own attempt number for a JetStream delivery number: deliveries that workers handed
 * back on shutdown are not attempts. Never below 1 (a delivery is at least the first).
 */
function attemptOf(job: Pick<JobDocument, 'handedBack'>, delivery: number): number {
  return Math.max(1, delivery - (job.handedBack ?? 0));
}

export interface CompletionReport {
  jobId: string;
  attempt: number;
  outputKey: string | null;
  outputText: string | null;
  metrics: JobMetrics;
  usage: UsageDimensions;
}

/**
 * The worker-facing transitions: `beginAttempt`, `completeJob`, `failAttempt`. Each reads the
 * job, decides (domain/transitions.ts) and applies the decision as one guarded update on the
 * state it read; terminal states are thus reached exactly once, and their side effects go
 * through the Settlement.
 */
export class JobAttempts {
  constructor(
    private readonly jobs: JobRepository,
    private readonly settlement: Settlement,
    private readonly settings: { retryBaseMs: number },
    private readonly clock: () => Date,
    private readonly logger: Logger,
    /** Jitter source of the retry backoff. */
    private readonly random: RandomSource = Math.random,
  ) {}

  async begin(
    jobId: string,
    attempt: number,
    worker: string,
  ): Promise<{ action: 'run' | 'skip' | 'superseded' | 'failed'; work?: JobWorkMessage }> {
    const { jobs, clock, logger } = this;
    const started = await this.startCreated(jobId, attempt, worker);
    if (started !== null) return started;
    for (let round = 0; round < CONTENTION_ROUNDS; round++) {
      const job = await jobs.find(jobId);
      if (job === null) {
        // A message for a job that does not exist can never run; drop it.
        logger.warn({ jobId, attempt, worker }, 'work for an unknown job');
        return { action: 'skip' };
      }
      const decision = decideBegin(job, attemptOf(job, attempt), LIMITS.attempts);
      switch (decision.kind) {
        case 'skip':
          // A completed job delivered again: its event may be what a crash cut short.
          if (job.status === 'completed') await this.settlement.settleReported(job);
          return { action: 'skip' };
        case 'superseded':
          return { action: 'superseded' };
        case 'resume':
          return { action: 'run', work: jobWorkOf(job) };
        case 'fail':
          if (await this.fail(job, decision.attempt, decision.error)) {
            return { action: 'failed' };
          }
          continue;
        case 'start': {
          let from = job.status;
          if (from === 'created') {
            // The spec's lifecycle: a worker claims the job (created → pending) and starts it.
            const claimed = await jobs.transition(
              jobId,
              { status: 'created', attempts: job.attempts },
              { status: 'pending' },
              clock(),
            );
            if (!claimed) continue;
            from = 'pending';
          }
          const started = await jobs.transition(
            jobId,
            { status: from, attempts: job.attempts },
            { status: 'processing', attempts: decision.attempt, retryAt: null },
            clock(),
          );
          if (!started) continue;
          logger.debug({ jobId, attempt: decision.attempt, worker }, 'attempt started');
          return { action: 'run', work: jobWorkOf(job) };
        }
      }
    }
    throw contention(jobId);
  }

  /**
   * The common case in two writes and no read: a job never started is claimed (`created →
   * pending`, guarded on exactly that), and as a job in that state has no attempt made and no
   * hand-back, decideBegin would start attempt `delivery` (the deliveries before it were lost
   * attempts), so it does. Null when the job is in any other state: the caller decides on it.
   */
  private async startCreated(
    jobId: string,
    delivery: number,
    worker: string,
  ): Promise<{ action: 'run'; work: JobWorkMessage } | null> {
    if (delivery > LIMITS.attempts) return null;
    const { jobs, clock, logger } = this;
    const claimed = await jobs.claimCreated(jobId, clock());
    if (claimed === null) return null;
    const started = await jobs.transition(
      jobId,
      { status: 'pending', attempts: 0 },
      { status: 'processing', attempts: delivery, retryAt: null },
      clock(),
    );
    // Changed in between (by a concurrent delivery): the caller reads it and decides.
    if (!started) return null;
    logger.debug({ jobId, attempt: delivery, worker }, 'attempt started');
    return { action: 'run', work: jobWorkOf(claimed) };
  }

  async complete(delivered: CompletionReport): Promise<{ accepted: boolean }> {
    const { jobs, clock } = this;
    // The common case, one write and no read: the attempt is still running as it was started.
    const running = attemptOf({}, delivered.attempt);
    const at = clock();
    const completed = await jobs.completeRunning(
      delivered.jobId,
      running,
      completionChanges(delivered, running, at),
      at,
    );
    if (completed !== null) {
      await this.settlement.settleReported(completed);
      return { accepted: true };
    }
    for (let round = 0; round < CONTENTION_ROUNDS; round++) {
      const job = await jobs.find(delivered.jobId);
      if (job === null) throw new ServiceError('JOB_NOT_FOUND', `No job ${delivered.jobId}`);
      const attempt = attemptOf(job, delivered.attempt);
      if (job.status === 'completed') {
        // A repeated report: publish again what a crash may have cut short.
        await this.settlement.settleReported(job);
        return { accepted: job.attempts === attempt };
      }
      if (!mayComplete(job.status)) return { accepted: false };
      const now = clock();
      const changes = completionChanges(delivered, Math.max(job.attempts, attempt), now);
      if (
        await jobs.transition(job._id, { status: job.status, attempts: job.attempts }, changes, now)
      ) {
        await this.settlement.settleReported({ ...job, ...changes, updatedAt: now });
        return { accepted: true };
      }
    }
    throw contention(delivered.jobId);
  }

  /**
   * A worker shutting down gives a running attempt back: processing → pending with the attempt
   * uncounted, so the redelivery runs as the same attempt number. Only the attempt that is
   * running can be handed back; anything else (already finished, a stale delivery) is refused.
   */
  async handBack(jobId: string, delivery: number): Promise<{ accepted: boolean }> {
    const { jobs, clock, logger } = this;
    for (let round = 0; round < CONTENTION_ROUNDS; round++) {
      const job = await jobs.find(jobId);
      if (job === null) throw new ServiceError('JOB_NOT_FOUND', `No job ${jobId}`);
      if (job.status !== 'processing' || job.attempts !== attemptOf(job, delivery)) {
        return { accepted: false };
      }
      // A job handed back this often is failing in a way that only looks transient: from now
      // on its attempts count, so it still ends.
      if ((job.handedBack ?? 0) >= MAX_HAND_BACKS) return { accepted: false };
      const handedBack = await jobs.transition(
        jobId,
        { status: 'processing', attempts: job.attempts },
        { status: 'pending', attempts: job.attempts - 1, handedBack: (job.handedBack ?? 0) + 1 },
        clock(),
      );
      if (handedBack) {
        logger.info({ jobId, attempt: job.attempts }, 'attempt handed back; it does not count');
        return { accepted: true };
      }
    }
    throw contention(jobId);
  }

  async fail(job: JobDocument, attempt: number, error: string): Promise<boolean> {
    const now = this.clock();
    const changes: Partial<JobDocument> = {
      status: 'failed',
      attempts: Math.max(job.attempts, attempt),
      error,
      lastError: error,
      retryAt: null,
      completedAt: now,
      refundPending: true,
      eventPublished: false,
    };
    const applied = await this.jobs.transition(
      job._id,
      { status: job.status, attempts: job.attempts },
      changes,
      now,
    );
    if (applied) await this.settlement.settle({ ...job, ...changes, updatedAt: now });
    return applied;
  }

  async failAttempt(
    jobId: string,
    attempt: number,
    error: string,
    permanent: boolean,
  ): Promise<{ status: 'pending' | 'failed'; retryInMs: number }> {
    const { jobs, clock, settings } = this;
    for (let round = 0; round < CONTENTION_ROUNDS; round++) {
      const job = await jobs.find(jobId);
      if (job === null) throw new ServiceError('JOB_NOT_FOUND', `No job ${jobId}`);
      const now = clock();
      const decision = decideFailure(job, attemptOf(job, attempt), permanent, {
        maxAttempts: LIMITS.attempts,
        retryBaseMs: settings.retryBaseMs,
        now,
        random: this.random,
      });
      switch (decision.kind) {
        case 'ignore':
          // Terminal already (e.g. a late report of an attempt given up on): nothing to retry.
          return { status: 'failed', retryInMs: 0 };
        case 'recorded':
          return { status: 'pending', retryInMs: decision.retryInMs };
        case 'fail':
          if (await this.fail(job, decision.attempt, error)) {
            return { status: 'failed', retryInMs: 0 };
          }
          continue;
        case 'retry': {
          const retried = await jobs.transition(
            jobId,
            { status: job.status, attempts: job.attempts },
            {
              status: 'pending',
              attempts: decision.attempt,
              lastError: error,
              retryAt: new Date(now.getTime() + decision.delayMs),
            },
            now,
          );
          if (retried) return { status: 'pending', retryInMs: decision.delayMs };
          continue;
        }
      }
    }
    throw contention(jobId);
  }
}

/** What a completion writes: the same whether decided with or without reading the job. */
function completionChanges(
  report: CompletionReport,
  attempts: number,
  now: Date,
): Partial<JobDocument> {
  return {
    status: 'completed',
    attempts,
    result: {
      outputKey: report.outputKey,
      outputText: report.outputText,
      metrics: withCompressionRatio(report.metrics),
      expired: false,
    },
    usage: report.usage,
    error: null,
    retryAt: null,
    completedAt: now,
    resultExpiryHour: resultExpiryHourOf(now),
  };
}

function contention(jobId: string): ServiceError {
  return new ServiceError('UNAVAILABLE', `Job ${jobId} is changing concurrently; retry`);
}
