import type { Logger, ObjectStore } from '@tamp/kit';
import { LIMITS } from '@tamp/proto';
import type { AdmissionRepository } from '../adapters/admission-repository';
import type { IdempotencyRepository } from '../adapters/idempotency-repository';
import type { JobRepository } from '../adapters/job-repository';
import type { JobMessaging } from '../adapters/messaging';
import { jobWorkOf } from '../domain/events';
import { ExpiryWalk } from '../domain/expiry-hours';
import type { FinishedJobs } from './finished-jobs';
import type { JobSettings } from './job-settings';
import type { Settlement } from './settlement';
import type { UnfinishedCreations } from './unfinished-creations';

export interface SweepReport {
  expiredResults: number;
  expiredKeys: number;
  republished: number;
  settled: number;
  /** Creations settled past their deadline: finished (their job stored) or abandoned. */
  admissionsClosed: number;
}

const BATCH = 100;

/** What a fresh process looks back over once: anything that expired while no sweeper ran. */
const EXPIRY_LOOKBACK_MS = LIMITS.resultRetentionMs;
/**
 * Hour buckets one pass expires at most (ExpiryWalk): a fresh process walks its week of
 * look-back over its first passes instead of in one, and nothing expires more than minutes late.
 */
const EXPIRY_BUCKETS_PER_PASS = 6;

/** What expiring one hour bucket did: how many expired, and whether nothing is left in it. */
interface BucketOutcome {
  expired: number;
  finished: boolean;
}
export interface SweeperCollaborators {
  jobs: JobRepository;
  claims: IdempotencyRepository;
  admissions: AdmissionRepository;
  unfinished: UnfinishedCreations;
  messaging: JobMessaging;
  settlement: Settlement;
  store: ObjectStore;
  /** The reads' finished jobs: a result expired here is forgotten there. */
  finished: Pick<FinishedJobs, 'forget'>;
  settings: Pick<JobSettings, 'reconcileAfterMs' | 'abandonAfterMs'>;
  clock: () => Date;
  logger: Logger;
}

/**
 * The periodic housekeeping FerretDB cannot do with TTL indexes, plus the outbox reconciler:
 * - retention: 7 days after completion the output object is deleted and the job marked
 *   `result.expired` (metrics stay);
 * - idempotency keys older than 24 hours are deleted;
 *   (both walk hour buckets, so a pass reads what expires now, not every stored job);
 * - creations whose admission outlived their deadline are finished (a stored job's work or
 *   inline event published again) or abandoned (a reservation without a job released);
 * - queued jobs' unconfirmed refunds and events are settled again, and `created` jobs stored
 *   before admissions answered for the publish, whose publish was never confirmed, republished
 *   (receivers deduplicate each).
 */
export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<SweepReport> | undefined;
  private readonly resultExpiry = new ExpiryWalk(EXPIRY_LOOKBACK_MS, EXPIRY_BUCKETS_PER_PASS);
  private readonly keyExpiry = new ExpiryWalk(EXPIRY_LOOKBACK_MS, EXPIRY_BUCKETS_PER_PASS);
  /** Ends a pass between two queries once the service stops. */
  private readonly stopping = new AbortController();

  constructor(private readonly collaborators: SweeperCollaborators) {}

  start(intervalMs: number): void {
    if (intervalMs <= 0) return;
    this.timer = setInterval(() => {
      void this.sweep().catch((error: unknown) =>
        this.collaborators.logger.error({ err: error }, 'sweep failed'),
      );
    }, intervalMs);
    this.timer.unref();
  }

  /**
   * Stops the timer and cuts the running pass short at its next query: a stopping service must
   * not wait for a long pass (its requests would wait with it, past the shutdown's time-out).
   */
  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.stopping.abort();
    await this.running?.catch(() => undefined);
  }

  /** One pass of every sweeper as of `now`; passes never overlap. */
  async sweep(now: Date = this.collaborators.clock()): Promise<SweepReport> {
    if (this.running !== undefined) await this.running.catch(() => undefined);
    const pass = this.sweepOnce(now);
    this.running = pass;
    try {
      return await pass;
    } finally {
      if (this.running === pass) this.running = undefined;
    }
  }

  /**
   * Each sweeper on its own: one that fails this pass (its query timed out, a peer is away) is
   * logged and counted as 0, and the others still run, so a failing expiry never holds back
   * the settlement of an abandoned creation. The next pass retries it.
   */
  private async sweepOnce(now: Date): Promise<SweepReport> {
    const staleBefore = new Date(now.getTime() - this.collaborators.settings.reconcileAfterMs);
    const abandonBefore = new Date(now.getTime() - this.collaborators.settings.abandonAfterMs);
    const keysCreatedBefore = new Date(now.getTime() - LIMITS.idempotencyKeyTtlMs);
    return {
      expiredResults: await this.step('expiredResults', () =>
        expireByHour(this.resultExpiry, now, this.stopping.signal, (bucket) =>
          this.expireResults(bucket, now),
        ),
      ),
      expiredKeys: await this.step('expiredKeys', () =>
        expireByHour(this.keyExpiry, now, this.stopping.signal, async (bucket) => ({
          expired: await this.collaborators.claims.deleteExpired(bucket, keysCreatedBefore),
          finished: true,
        })),
      ),
      republished: await this.step('republished', () => this.republish(staleBefore)),
      settled: await this.step('settled', () => this.settle(staleBefore)),
      admissionsClosed: await this.step('admissionsClosed', () =>
        this.settleOverdueAdmissions(now, abandonBefore),
      ),
    };
  }

  private async step(name: keyof SweepReport, sweep: () => Promise<number>): Promise<number> {
    if (this.stopping.signal.aborted) return 0;
    try {
      return await sweep();
    } catch (error) {
      this.collaborators.logger.error({ err: error, sweeper: name }, 'sweep failed');
      return 0;
    }
  }

  /** Creations past their deadline whose admission is still open (UnfinishedCreations). */
  private async settleOverdueAdmissions(now: Date, abandonBefore: Date): Promise<number> {
    const { admissions, unfinished } = this.collaborators;
    let closed = 0;
    for (const admission of await admissions.overdue(now, BATCH)) {
      if ((await unfinished.trySettleOverdue(admission, abandonBefore)) !== 'undecided') closed++;
    }
    return closed;
  }

  private async expireResults(bucket: string, now: Date): Promise<BucketOutcome> {
    const { jobs, store, logger } = this.collaborators;
    const completedBefore = new Date(now.getTime() - LIMITS.resultRetentionMs);
    const due = await jobs.pastRetention(bucket, completedBefore, BATCH);
    let expired = 0;
    for (const job of due) {
      const key = job.result?.outputKey ?? null;
      try {
        // Deleting a missing object succeeds in S3, so a repeated pass is harmless.
        if (key !== null) await store.remove(key);
        if (await jobs.markExpired(job._id, now)) expired++;
        this.collaborators.finished.forget(job._id);
      } catch (error) {
        logger.warn({ err: error, jobId: job._id }, 'result not expired; next pass retries');
      }
    }
    return { expired, finished: due.length < BATCH && expired === due.length };
  }

  private async republish(createdBefore: Date): Promise<number> {
    const { jobs, messaging, logger } = this.collaborators;
    const confirmations: Promise<void>[] = [];
    for (const job of await jobs.unpublished(createdBefore, BATCH)) {
      try {
        await messaging.publishWork(jobWorkOf(job));
        // Confirmed together (write-behind), not one wait of the linger per job.
        confirmations.push(jobs.markDone(job._id, 'workPublished'));
      } catch (error) {
        logger.warn({ err: error, jobId: job._id }, 'work still not published');
      }
    }
    const confirmed = await Promise.allSettled(confirmations);
    return confirmed.filter((outcome) => outcome.status === 'fulfilled').length;
  }

  private async settle(updatedBefore: Date): Promise<number> {
    const unsettled = await this.collaborators.jobs.unsettled(updatedBefore, BATCH);
    for (const job of unsettled) await this.collaborators.settlement.settle(job);
    return unsettled.length;
  }
}

/**
 * Expires every bucket `walk` says is due, oldest first, and moves the walk past finished ones.
 * A stop ends it between two buckets; the ones not visited count as unfinished.
 */
async function expireByHour(
  walk: ExpiryWalk,
  now: Date,
  stopping: AbortSignal,
  expireBucket: (bucket: string) => Promise<BucketOutcome>,
): Promise<number> {
  const due = walk.due(now);
  let expired = 0;
  let firstUnfinished: string | undefined;
  for (const bucket of due) {
    if (stopping.aborted) {
      firstUnfinished ??= bucket;
      break;
    }
    const outcome = await expireBucket(bucket);
    expired += outcome.expired;
    if (!outcome.finished) firstUnfinished ??= bucket;
  }
  // All finished: the walk may move up to the current hour (finishedBefore keeps the margin).
  walk.finishedBefore(firstUnfinished ?? due.at(-1)!, now);
  return expired;
}
