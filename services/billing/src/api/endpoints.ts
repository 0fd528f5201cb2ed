import { EndpointGroup, type Rpc } from '@tamp/kit';
import { billingEndpoints } from '@tamp/proto';
import type { Accounts } from '../application/accounts';
import type { ApiKeys } from '../application/api-keys';
import type { Credits } from '../application/credits';

/** `billingEndpoints` on NATS request/reply: each handler is one call into application/. */
export function serveBillingEndpoints(
  rpc: Rpc,
  accounts: Accounts,
  keys: ApiKeys,
  credits: Credits,
): Promise<EndpointGroup> {
  return new EndpointGroup(rpc)
    .serve(billingEndpoints.authenticate, ({ apiKey }) => keys.authenticate(apiKey))
    .serve(billingEndpoints.getAccount, ({ accountId }) => accounts.get(accountId))
    .serve(billingEndpoints.reserveCredits, (request) => credits.reserve(request))
    .serve(billingEndpoints.refundCredits, (request) => credits.refund(request))
    .serve(billingEndpoints.getUsage, ({ accountId }) => accounts.usageOf(accountId))
    .serve(billingEndpoints.createAccount, (request) => accounts.create(request))
    .serve(billingEndpoints.updateAccount, (request) => accounts.update(request))
    .serve(billingEndpoints.rotateWebhookSecret, ({ accountId, gracePeriodSeconds }) =>
      accounts.rotateWebhookSecret(accountId, gracePeriodSeconds),
    )
    .serve(billingEndpoints.addCredits, ({ accountId, credits: amount }) =>
      credits.grant(accountId, amount),
    )
    .serve(billingEndpoints.createKey, ({ accountId }) => keys.create(accountId))
    .serve(billingEndpoints.revokeKey, ({ keyId }) => keys.revoke(keyId))
    .serve(billingEndpoints.listKeys, ({ accountId }) => keys.list(accountId))
    .ready();
}
