import { LIMITS } from '@tamp/proto';
import type { JobContext } from '../context';
import { jobWorkOf } from '../domain/events';
import type { Settlement } from '../settlement';

export interface SweepReport {
  expiredResults: number;
  expiredKeys: number;
  republished: number;
  settled: number;
}

const BATCH = 100;

/**
 * The periodic housekeeping FerretDB cannot do with TTL indexes, plus the outbox reconciler:
 * - retention: 7 days after completion the output object is deleted and the job marked
 *   `result.expired` (metrics stay);
 * - idempotency keys older than 24 hours are deleted;
 * - `created` jobs whose publish was never confirmed are republished (JOBS dedups on the id);
 * - terminal jobs with an unconfirmed refund or event are settled again.
 */
export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<SweepReport> | undefined;

  constructor(
    private readonly context: JobContext,
    private readonly settlement: Settlement,
  ) {}

  start(intervalMs: number): void {
    if (intervalMs <= 0) return;
    this.timer = setInterval(() => {
      void this.sweep().catch((error: unknown) =>
        this.context.logger.error({ err: error }, 'sweep failed'),
      );
    }, intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }

  /** One pass of every sweeper as of `now`; passes never overlap. */
  async sweep(now: Date = this.context.clock()): Promise<SweepReport> {
    if (this.running !== undefined) await this.running.catch(() => undefined);
    const pass = this.sweepOnce(now);
    this.running = pass;
    try {
      return await pass;
    } finally {
      if (this.running === pass) this.running = undefined;
    }
  }

  private async sweepOnce(now: Date): Promise<SweepReport> {
    const report: SweepReport = { expiredResults: 0, expiredKeys: 0, republished: 0, settled: 0 };
    report.expiredResults = await this.expireResults(now);
    report.expiredKeys = await this.context.claims.deleteOlderThan(
      new Date(now.getTime() - LIMITS.idempotencyKeyTtlMs),
    );
    const staleBefore = new Date(now.getTime() - this.context.settings.reconcileAfterMs);
    report.republished = await this.republish(staleBefore);
    report.settled = await this.settle(staleBefore);
    return report;
  }

  private async expireResults(now: Date): Promise<number> {
    const { jobs, store, logger } = this.context;
    const due = await jobs.pastRetention(new Date(now.getTime() - LIMITS.resultRetentionMs), BATCH);
    let expired = 0;
    for (const job of due) {
      const key = job.result?.outputKey ?? null;
      try {
        // Deleting a missing object succeeds in S3, so a repeated pass is harmless.
        if (key !== null) await store.remove(key);
        if (await jobs.markExpired(job._id, now)) expired++;
      } catch (error) {
        logger.warn({ err: error, jobId: job._id }, 'result not expired; next pass retries');
      }
    }
    return expired;
  }

  private async republish(createdBefore: Date): Promise<number> {
    const { jobs, messaging, logger } = this.context;
    let republished = 0;
    for (const job of await jobs.unpublished(createdBefore, BATCH)) {
      try {
        await messaging.publishWork(jobWorkOf(job));
        await jobs.markDone(job._id, { workPublished: true });
        republished++;
      } catch (error) {
        logger.warn({ err: error, jobId: job._id }, 'work still not published');
      }
    }
    return republished;
  }

  private async settle(updatedBefore: Date): Promise<number> {
    const unsettled = await this.context.jobs.unsettled(updatedBefore, BATCH);
    for (const job of unsettled) await this.settlement.settle(job);
    return unsettled.length;
  }
}
