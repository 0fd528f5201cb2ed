import type { EndpointResponse, Rpc } from '@tamp/kit';
import { billingEndpoints, ServiceError } from '@tamp/proto';

/** An account as billing answers it: its default webhook URL and its signing secrets. */
export type WebhookAccount = EndpointResponse<typeof billingEndpoints.getAccount>;

/** The accounts, read from billing on every use (never cached: secrets rotate). */
export class BillingAccounts {
  constructor(private readonly rpc: Rpc) {}

  /** Null when billing says the account no longer exists; throws when billing is unavailable. */
  async find(accountId: string): Promise<WebhookAccount | null> {
    try {
      return await this.rpc.call(billingEndpoints.getAccount, { accountId });
    } catch (error) {
      if (error instanceof ServiceError && error.code === 'NOT_FOUND') return null;
      throw error;
    }
  }
}
