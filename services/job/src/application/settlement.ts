import type { JobOutcomeMetrics, Logger, Rpc } from '@tamp/kit';
import { billingEndpoints, presetLabel } from '@tamp/proto';
import type { JobRepository } from '../adapters/job-repository';
import type { JobMessaging } from '../adapters/messaging';
import { jobEventOf } from '../domain/events';
import { isTerminal, type JobDocument } from '../domain/job';

/**
 * Side effects of a terminal state, each at least once and made exactly-once by its receiver:
 * the refund of a failed job (billing's ledger entry `refund:<jobId>` makes a repeat a no-op),
 * the EVENTS message (dedup id `<jobId>:<event>`), and the long-poll notification. The job
 * document's outbox flags record what is confirmed; the reconciler redoes the rest after a
 * crash or an outage.
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
    /** Terminal jobs and their duration (absent in tests that do not read them). */
    private readonly metrics?: JobOutcomeMetrics,
  ) {}

  async settle(job: JobDocument): Promise<void> {
    if (!isTerminal(job.status)) return;
    const { jobs, logger, messaging, rpc } = this;
    if (job.status === 'failed' && job.refundPending) {
      try {
        await rpc.call(billingEndpoints.refundCredits, {
          accountId: job.accountId,
          jobId: job._id,
        });
        await jobs.markDone(job._id, 'refundPending');
      } catch (error) {
        logger.warn({ err: error, jobId: job._id }, 'refund not confirmed; the reconciler retries');
      }
    }
    if (!job.eventPublished) {
      try {
        await messaging.publishEvent(jobEventOf(job));
        await jobs.markDone(job._id, 'eventPublished');
        // Counted with the event, which is published once per job (its outbox flag).
        this.metrics?.record({
          pipeline: job.pipeline,
          preset: presetLabel(job.preset),
          status: job.status,
          inline: job.inline,
          createdAt: job.createdAt,
          finishedAt: job.completedAt ?? job.updatedAt,
        });
      } catch (error) {
        logger.warn(
          { err: error, jobId: job._id },
          'job event not published; the reconciler retries',
        );
      }
    }
    messaging.notify({ jobId: job._id, status: job.status });
  }
}
