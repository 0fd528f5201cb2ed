import { EndpointGroup, type Rpc } from '@tamp/kit';
import { billingEndpoints } from '@tamp/proto';
import type { Accounts } from '../application/accounts';
import type { ApiKeys } from '../application/api-keys';
import type { Credits } from '../application/credits';
import type { DashboardSessions } from '../application/dashboard-sessions';
import type { UsageReports } from '../application/usage-report';

export interface BillingApplication {
  accounts: Accounts;
  keys: ApiKeys;
  credits: Credits;
  sessions: DashboardSessions;
  usageReports: UsageReports;
}

/** `billingEndpoints` on NATS request/reply: each handler is one call into application/. */
export function serveBillingEndpoints(
  rpc: Rpc,
  { accounts, keys, credits, sessions, usageReports }: BillingApplication,
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
    .serve(billingEndpoints.revokeKey, ({ keyId, accountId }) => keys.revoke(keyId, accountId))
    .serve(billingEndpoints.listKeys, ({ accountId }) => keys.list(accountId))
    .serve(billingEndpoints.createSignInLink, ({ accountId }) =>
      sessions.createSignInLink(accountId),
    )
    .serve(billingEndpoints.startSession, (request) => sessions.start(request))
    .serve(billingEndpoints.authenticateSession, ({ sessionToken }) =>
      sessions.authenticate(sessionToken),
    )
    .serve(billingEndpoints.endSession, ({ sessionToken }) => sessions.end(sessionToken))
    .serve(billingEndpoints.revokeSessions, ({ accountId }) => sessions.revokeAll(accountId))
    .serve(billingEndpoints.getUsageReport, ({ accountId }) => usageReports.of(accountId))
    .ready();
}
