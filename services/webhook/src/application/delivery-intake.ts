import { contextToStore, type Logger, type StreamVerdict } from '@tamp/kit';
import type { JobEvent } from '@tamp/proto';
import type { BillingAccounts, DefaultTarget } from '../adapters/billing-accounts';
import type { DeliveryRepository } from '../adapters/delivery-repository';
import { buildPayload, deliveryKey, serializePayload, webhookIdFor } from '../domain/payload';

/** Turns a job event into its one durable delivery sequence (`webhook_deliveries`). */
export class DeliveryIntake {
  constructor(
    private readonly deliveries: DeliveryRepository,
    private readonly accounts: BillingAccounts,
    private readonly now: () => Date,
    private readonly logger: Logger,
    /** Called when a new sequence is due now, so its first attempt need not wait for a poll. */
    private readonly onScheduled: () => void = () => undefined,
  ) {}

  /** `ack`: done (scheduled, duplicate, or nothing to do). `retry`: billing is down; later. */
  async accept(event: JobEvent): Promise<StreamVerdict> {
    const log = this.logger.child({ jobId: event.jobId, event: event.event });
    // Inline jobs never emit webhooks: their result was in the response (docs/decisions.md#webhooks).
    if (event.inline) return 'ack';
    // The target is resolved before anything is read from this service's own collections, so a
    // job without a webhook costs no database operation here (and, once its account's default is
    // remembered, no request to billing); a redelivered event whose sequence exists is
    // recognised by the insert below (a duplicate key).
    let target = event.webhookUrl;
    let targetSource: 'job' | 'account' = 'job';
    if (target === null || target === '') {
      let account: DefaultTarget;
      try {
        account = await this.accounts.defaultTarget(event.accountId);
      } catch (error) {
        log.warn({ err: error }, 'billing unavailable; the event will be retried');
        return 'retry';
      }
      if (!account.found) {
        log.warn({ accountId: event.accountId }, 'account not found; no webhook to send');
        return 'ack';
      }
      target = account.webhookUrl;
      targetSource = 'account';
    }
    if (target === null || target === '') return 'ack';
    const createdAt = this.now();
    const inserted = await this.deliveries.schedule({
      _id: deliveryKey(event.jobId, event.event),
      jobId: event.jobId,
      accountId: event.accountId,
      event: event.event,
      target,
      targetSource,
      body: serializePayload(buildPayload(event)),
      webhookId: webhookIdFor(event.jobId, event.event),
      traceContext: contextToStore(),
      nextAttemptAt: createdAt,
      createdAt,
    });
    log.info({ target, targetSource, duplicate: !inserted }, 'webhook delivery scheduled');
    if (inserted) this.onScheduled();
    return 'ack';
  }
}
