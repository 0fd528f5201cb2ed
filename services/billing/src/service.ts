import type { Subscription } from '@nats-io/nats-core';
import {
  type CreditMetrics,
  type NatsConnection,
  Rpc,
  recordRefund,
  recordReservation,
} from '@tamp/kit';
import { billingEndpoints, newId, ServiceError, type Topology } from '@tamp/proto';
import type { Db } from 'mongodb';
import type { Logger } from 'pino';
import { AccountStore } from './adapters/account-store';
import { CreditBook } from './adapters/credit-book';
import type { AccountDocument, ApiKeyDocument } from './adapters/documents';
import { consumeJobEvents } from './adapters/job-event-consumer';
import { KeyStore } from './adapters/key-store';
import { UsageStore } from './adapters/usage-store';
import { billingCycleAnchorProblem, billingPeriodAt, creditsNow } from './domain/billing-period';
import type { PlanCatalog } from './domain/plans';
import { usageSummary } from './domain/usage-summary';
import {
  DEFAULT_WEBHOOK_SECRET_GRACE_MS,
  generateWebhookSecret,
  SecretSealer,
  secretInGrace,
} from './domain/webhook-secret';

export interface BillingDependencies {
  nats: NatsConnection;
  topology: Topology;
  /** Must be owned by this service alone (see kit's connectMongo on FerretDB). */
  db: Db;
  plans: PlanCatalog;
  logger: Logger;
  /** Seals webhook secrets at rest (AES-256-GCM); null stores them plain. */
  secretsEncryptionKey?: Buffer | null;
  /** How long a rotated-out webhook secret keeps signing when the rotation names no period. */
  webhookSecretGraceMs?: number;
  /** The time periods and records are based on; tests move it. */
  now?: () => Date;
  metrics?: CreditMetrics;
}

/** Serves every billing endpoint and consumes job events; `stop` drains both. */
export async function startBilling(
  dependencies: BillingDependencies,
): Promise<{ stop(): Promise<void> }> {
  const { db, plans, logger, metrics } = dependencies;
  const now = dependencies.now ?? (() => new Date());
  const sealer = new SecretSealer(dependencies.secretsEncryptionKey ?? null);
  const webhookSecretGraceMs = dependencies.webhookSecretGraceMs ?? DEFAULT_WEBHOOK_SECRET_GRACE_MS;
  const accounts = new AccountStore(db, plans, now);
  const credits = new CreditBook(db, accounts, now);
  const keys = new KeyStore(db, now);
  const usage = new UsageStore(db);
  const rpc = new Rpc(dependencies.nats, dependencies.topology, logger);

  const accountView = (account: AccountDocument) => {
    // The webhook service signs with whatever this returns, so the grace rule lives here alone.
    const previous = secretInGrace(account.previousWebhookSecret, now());
    return {
      accountId: account._id,
      plan: account.plan,
      maxUploadBytes: plans[account.plan].maxUploadBytes,
      rateLimitPerMinute: plans[account.plan].rateLimitPerMinute,
      webhookUrl: account.webhookUrl,
      webhookSecret: sealer.open(account.webhookSecret),
      previousWebhookSecret:
        previous === null
          ? null
          : { secret: sealer.open(previous.secret), validUntil: previous.validUntil.toISOString() },
      billingCycleAnchor: account.billingCycleAnchor?.toISOString() ?? null,
      createdAt: account.createdAt.toISOString(),
      credits: creditsNow(account, plans[account.plan].creditsPerPeriod, now()),
    };
  };
  /** Parses an anchor from a request, refusing one in the future (VALIDATION_ERROR). */
  const anchorAt = (iso: string): Date => {
    const anchor = new Date(iso);
    const problem = billingCycleAnchorProblem(anchor, now());
    if (problem !== null) {
      throw new ServiceError('VALIDATION_ERROR', `billingCycleAnchor ${problem}`, [
        { path: 'billingCycleAnchor', message: problem },
      ]);
    }
    return anchor;
  };
  const keyView = (key: ApiKeyDocument) => ({
    keyId: key._id,
    accountId: key.accountId,
    displayPrefix: key.displayPrefix,
    createdAt: key.createdAt.toISOString(),
    revokedAt: key.revokedAt?.toISOString() ?? null,
  });

  const subscriptions: Subscription[] = [
    rpc.serve(billingEndpoints.authenticate, async ({ apiKey }) => {
      const key = await keys.verify(apiKey);
      // A key whose account is gone authenticates nobody.
      const account = await accounts.find(key.accountId).catch((error: unknown) => {
        if (error instanceof ServiceError && error.code === 'NOT_FOUND') {
          throw new ServiceError('UNAUTHORIZED', 'The API key is missing, invalid or revoked');
        }
        throw error;
      });
      const limits = plans[account.plan];
      return {
        accountId: account._id,
        plan: account.plan,
        maxUploadBytes: limits.maxUploadBytes,
        rateLimitPerMinute: limits.rateLimitPerMinute,
        keyId: key._id,
      };
    }),
    rpc.serve(billingEndpoints.getAccount, async ({ accountId }) => {
      const account = await accounts.find(accountId);
      await accounts.forgetExpiredWebhookSecret(account);
      return accountView(account);
    }),
    rpc.serve(billingEndpoints.reserveCredits, async (request) => {
      const answer = await credits.reserve(request);
      if (metrics) recordReservation(metrics, request.pipeline, answer);
      return answer;
    }),
    rpc.serve(billingEndpoints.refundCredits, async (request) => {
      const answer = await credits.refund(request);
      if (metrics) recordRefund(metrics, answer);
      return answer;
    }),
    rpc.serve(billingEndpoints.getUsage, async ({ accountId }) => {
      const account = await accounts.find(accountId);
      const period = billingPeriodAt(now(), account.billingCycleAnchor);
      return usageSummary(period, await usage.totals(accountId, period));
    }),
    rpc.serve(billingEndpoints.createAccount, async (request) => {
      const billingCycleAnchor =
        request.billingCycleAnchor === undefined ? null : anchorAt(request.billingCycleAnchor);
      const webhookSecret = generateWebhookSecret();
      const account = await accounts.create({
        accountId: newId('account'),
        plan: request.plan,
        webhookUrl: request.webhookUrl ?? null,
        sealedWebhookSecret: sealer.seal(webhookSecret),
        credits: request.credits,
        billingCycleAnchor,
      });
      const { apiKey } = await keys.create(account._id);
      return { accountId: account._id, apiKey, webhookSecret };
    }),
    rpc.serve(
      billingEndpoints.updateAccount,
      async ({ accountId, billingCycleAnchor, ...rest }) => {
        const changes = {
          ...rest,
          ...(billingCycleAnchor !== undefined && {
            billingCycleAnchor: billingCycleAnchor === null ? null : anchorAt(billingCycleAnchor),
          }),
        };
        return accountView(await accounts.update(accountId, changes));
      },
    ),
    rpc.serve(billingEndpoints.rotateWebhookSecret, async ({ accountId, gracePeriodSeconds }) => {
      const webhookSecret = generateWebhookSecret();
      const graceMs =
        gracePeriodSeconds === undefined ? webhookSecretGraceMs : gracePeriodSeconds * 1000;
      const previousValidUntil = new Date(now().getTime() + graceMs);
      await accounts.rotateWebhookSecret(accountId, sealer.seal(webhookSecret), previousValidUntil);
      // Never the secret itself: it goes to the operator in the reply only.
      logger.info({ accountId, previousValidUntil }, 'webhook secret rotated');
      return { webhookSecret, previousValidUntil: previousValidUntil.toISOString() };
    }),
    rpc.serve(billingEndpoints.addCredits, async ({ accountId, credits: amount }) => ({
      accountId,
      grantedCredits: await credits.grant(accountId, amount),
    })),
    rpc.serve(billingEndpoints.createKey, async ({ accountId }) => {
      await accounts.find(accountId);
      return keys.create(accountId);
    }),
    rpc.serve(billingEndpoints.revokeKey, async ({ keyId }) => keyView(await keys.revoke(keyId))),
    rpc.serve(billingEndpoints.listKeys, async ({ accountId }) => {
      await accounts.find(accountId);
      return { keys: (await keys.list(accountId)).map(keyView) };
    }),
  ];

  const events = await consumeJobEvents({
    nats: dependencies.nats,
    topology: dependencies.topology,
    logger,
    // Only completions count towards usage. A failed job's refund is not made here: the job
    // service owns the job's terminal state and refunds through refund-credits from its
    // settlement outbox (refundPending, retried by its reconciler), so one mechanism keeps the
    // rule "refunded exactly once", and an inline failure is refunded before it is answered.
    async handle(event) {
      if (event.event === 'job.completed') await usage.recordCompleted(event);
    },
  });
  await dependencies.nats.flush();

  return {
    async stop() {
      await Promise.all(subscriptions.map((subscription) => subscription.drain()));
      await events.stop();
    },
  };
}
