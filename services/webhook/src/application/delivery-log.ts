import type { Logger } from '@tamp/kit';
import type { DeliveryStore } from '../adapters/delivery-store';
import type { WebhookEventName } from '../domain/payload';

/** What operators see and do: a job's attempts, and a fresh sequence on request. */
export class DeliveryLog {
  constructor(
    private readonly store: DeliveryStore,
    private readonly now: () => Date,
    private readonly logger: Logger,
  ) {}

  async list(jobId: string) {
    const attempts = await this.store.listAttempts(jobId);
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
    const reset = await this.store.redeliver(jobId, event, this.now());
    if (reset > 0) this.logger.info({ jobId, event, reset }, 'webhook redelivery scheduled');
    return { scheduled: reset > 0 };
  }
}
