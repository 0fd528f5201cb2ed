import type { Logger } from '@tamp/kit';
import { isId } from '@tamp/proto';
import type { AttemptRepository } from '../adapters/attempt-repository';
import type { DeliveryRepository } from '../adapters/delivery-repository';
import type { WebhookEventName } from '../domain/payload';

/** What operators see and do: a job's attempts, and a fresh sequence on request. */
export class DeliveryLog {
  constructor(
    private readonly deliveries: DeliveryRepository,
    private readonly attempts: AttemptRepository,
    private readonly now: () => Date,
    private readonly logger: Logger,
  ) {}

  /**
   * An id that is not a job id has no deliveries: it is not looked up (a string the database
   * cannot hold, such as one with U+0000, would fail the query instead of finding nothing).
   */
  async list(jobId: string) {
    const attempts = isId('job', jobId) ? await this.attempts.listOfJob(jobId) : [];
    return {
      deliveries: attempts.map((attempt) => ({
        deliveryId: attempt._id,
        jobId: attempt.jobId,
        event: attempt.event,
        attempt: attempt.attempt,
        attemptedAt: attempt.attemptedAt.toISOString(),
        target: attempt.target,
        statusCode: attempt.statusCode,
        latencyMs: attempt.latencyMs,
        outcome: attempt.outcome,
        error: attempt.error,
      })),
    };
  }

  async redeliver(jobId: string, event: WebhookEventName | undefined) {
    if (!isId('job', jobId)) return { scheduled: false };
    const reset = await this.deliveries.redeliver(jobId, event, this.now());
    if (reset > 0) this.logger.info({ jobId, event, reset }, 'webhook redelivery scheduled');
    return { scheduled: reset > 0 };
  }
}
