import type { JobOutcomeMetrics, Logger, Rpc } from '@tamp/kit';
import { billingEndpoints, presetLabel, ServiceError } from '@tamp/proto';
import type { JobRepository, OutboxFlag } from '../adapters/job-repository';
import type { JobMessaging } from '../adapters/messaging';
import { jobEventOf } from '../domain/events';
import { isTerminal, type JobDocument } from '../domain/job';
import type { FinishedJobs } from './finished-jobs';

/**
 * Side effects of a terminal state, each at least once and made exactly-once by its receiver:
 * the refund of a failed job (billing's ledger entry `refund:<jobId>` makes a repeat a no-op),
 * the EVENTS message (dedup id `<jobId>:<event>`), and the long-poll notification. A failed
 * queued job's document records in its outbox flags what is confirmed, and the reconciler redoes
 * the rest after a crash or an outage. Where something else already answers for the event, the
 * job carries no flag for it, because on FerretDB a flag's confirmation is the dearest write of
 * a job: an inline job's event is answered for by its creation's admission (`settleInline`), a
 * completion reported by a worker by the worker's JOBS delivery (`settleReported`).
 *
 * The job it is given is the one just stored, so it is remembered as a finished job read
 * (FinishedJobs) before the notification goes out: the long-poll that wakes on it, and the
 * client reading its result, read it again without a database command.
 *
 * This is the only refund path: billing consumes `job.failed` for nothing, so refunds follow
 * one rule, and an inline failure is refunded before its 200 answer.
 */
export class Settlement {
  constructor(
    private readonly jobs: JobRepository,
    private readonly messaging: JobMessaging,
    private readonly rpc: Rpc,
    private readonly logger: Logger,
    private readonly finished: FinishedJobs,
    /** Terminal jobs and their duration (absent in tests that do not read them). */
    private readonly metrics?: JobOutcomeMetrics,
  ) {}

  /** The side effects its outbox flags say are unconfirmed. */
  async settle(job: JobDocument): Promise<void> {
    if (!isTerminal(job.status)) return;
    await this.refundIfPending(job);
    if (job.eventPublished === false && (await this.publishEvent(job))) {
      this.confirm(job._id, 'eventPublished');
    }
    this.remember(job);
  }

  /**
   * A completion a worker reported, or a completed job a JOBS delivery found: its event is
   * answered for by that delivery, which the worker acknowledges only once this has returned.
   * A crash before the publish therefore brings the report back (the worker asks again, or the
   * delivery comes again and `beginAttempt` meets the completed job), and the event is published
   * then, deduplicated by EVENTS within its hour-long window. Throws UNAVAILABLE when EVENTS did
   * not take it, so that the worker keeps the delivery and asks again.
   */
  async settleReported(job: JobDocument): Promise<void> {
    if (!(await this.publishEvent(job))) {
      throw new ServiceError('UNAVAILABLE', `The event of job ${job._id} is not published yet`);
    }
    // Completed before the delivery answered for the event: the flag is still to be confirmed.
    if (job.eventPublished === false) this.confirm(job._id, 'eventPublished');
    this.remember(job);
  }

  /**
   * An inline job just stored, or one whose creation's admission outlived it: its refund (the
   * flag) and its event (no flag: the admission answers for it). True when both are confirmed,
   * so the caller may close the admission.
   */
  async settleInline(job: JobDocument): Promise<boolean> {
    const refunded = await this.refundIfPending(job);
    const published = await this.publishEvent(job);
    this.remember(job);
    return refunded && published;
  }

  private remember(job: JobDocument): void {
    this.finished.remember(job, Date.now());
    this.messaging.notify({ jobId: job._id, status: job.status });
  }

  /** A failed job's refund unless confirmed already: true when nothing is left unconfirmed. */
  private async refundIfPending(job: JobDocument): Promise<boolean> {
    if (job.status !== 'failed' || !job.refundPending) return true;
    try {
      await this.rpc.call(billingEndpoints.refundCredits, {
        accountId: job.accountId,
        jobId: job._id,
      });
      this.confirm(job._id, 'refundPending');
      return true;
    } catch (error) {
      this.logger.warn(
        { err: error, jobId: job._id },
        'refund not confirmed; the reconciler retries',
      );
      return false;
    }
  }

  /** True once EVENTS has the job's event. */
  private async publishEvent(job: JobDocument): Promise<boolean> {
    try {
      // Counted with the event's first store: a repeated report or delivery republishes it, and
      // EVENTS' dedup says which publish was the first.
      if (!(await this.messaging.publishEvent(jobEventOf(job)))) return true;
      this.metrics?.record({
        pipeline: job.pipeline,
        preset: presetLabel(job.preset),
        status: job.status,
        inline: job.inline,
        createdAt: job.createdAt,
        finishedAt: job.completedAt ?? job.updatedAt,
      });
      return true;
    } catch (error) {
      this.logger.warn(
        { err: error, jobId: job._id },
        'job event not published; the reconciler retries',
      );
      return false;
    }
  }

  /** Write-behind (JobRepository.markDone): the answer does not wait for the flag. */
  private confirm(jobId: string, flag: OutboxFlag): void {
    this.jobs.markDone(jobId, flag).catch((error: unknown) => {
      this.logger.warn(
        { err: error, jobId, flag },
        'outbox flag not written; the reconciler redoes it',
      );
    });
  }
}
