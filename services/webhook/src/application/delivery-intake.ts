import type { Logger, StreamVerdict } from '@tamp/kit';
import type { JobEvent } from '@tamp/proto';
import type { BillingAccounts } from '../adapters/billing-accounts';
import type { DeliveryStore } from '../adapters/delivery-store';
import { buildPayload, deliveryKey, serializePayload, webhookIdFor } from '../domain/payload';

/** Turns a job event into its one durable delivery sequence (`webhook_deliveries`). */
export class DeliveryIntake {
  constructor(
    private readonly store: DeliveryStore,
    private readonly accounts: BillingAccounts,
    private readonly now: () => Date,
    private readonly logger: Logger,
  ) {}

  /** `ack`: done (scheduled, duplicate, or nothing to do). `retry`: billing is down; later. */
  async accept(event: JobEvent): Promise<StreamVerdict> {
    const log = this.logger.child({ jobId: event.jobId, event: event.event });
    // Inline jobs never emit webhooks: their result was in the response (docs/decisions.md#webhooks).
    if (event.inline) return 'ack';
    const id = deliveryKey(event.jobId, event.event);
    // A redelivered event whose sequence exists needs no account lookup.
    if ((await this.store.get(id)) !== null) return 'ack';
    let target = event.webhookUrl;
    let targetSource: 'job' | 'account' = 'job';
    if (target === null || target === '') {
      let account: Awaited<ReturnType<BillingAccounts['find']>>;
      try {
        account = await this.accounts.find(event.accountId);
      } catch (error) {
        log.warn({ err: error }, 'billing unavailable; the event will be retried');
        return 'retry';
      }
      if (account === null) {
        log.warn({ accountId: event.accountId }, 'account not found; no webhook to send');
        return 'ack';
      }
      target = account.webhookUrl;
      targetSource = 'account';
    }
    if (target === null || target === '') return 'ack';
    const createdAt = this.now();
    const inserted = await this.store.schedule({
      _id: id,
      jobId: event.jobId,
      accountId: event.accountId,
      event: event.event,
      target,
      targetSource,
      body: serializePayload(buildPayload(event)),
      webhookId: webhookIdFor(event.jobId, event.event),
      nextAttemptAt: createdAt,
      createdAt,
    });
    log.info({ target, targetSource, duplicate: !inserted }, 'webhook delivery scheduled');
    return 'ack';
  }
}
