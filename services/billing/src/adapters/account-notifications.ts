import type { Logger, NatsConnection } from '@tamp/kit';
import type { AccountNotification, Topology } from '@tamp/proto';

/** `notify.account.<id>` after an account's settings changed, for the caches other services keep. */
export class AccountNotifications {
  constructor(
    private readonly nats: NatsConnection,
    private readonly topology: Topology,
    private readonly logger: Logger,
  ) {}

  /**
   * Core publish: a cache that misses it serves the old settings until its entry expires
   * (webhook's BillingAccounts: one minute).
   */
  changed(accountId: string): void {
    const notification: AccountNotification = { accountId };
    try {
      this.nats.publish(
        this.topology.subjects.accountNotification(accountId),
        JSON.stringify(notification),
      );
    } catch (error) {
      this.logger.warn({ err: error, accountId }, 'account notification not sent');
    }
  }
}
