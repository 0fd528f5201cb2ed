import { type CreditMetrics, type Db, type Logger, type NatsConnection, Rpc } from '@tamp/kit';
import type { Topology } from '@tamp/proto';
import { AccountStore } from './adapters/account-store';
import { CreditBook } from './adapters/credit-book';
import { KeyStore } from './adapters/key-store';
import { SessionRepository } from './adapters/session-repository';
import { SignInLinkRepository } from './adapters/sign-in-link-repository';
import { UsageStore } from './adapters/usage-store';
import { serveBillingEndpoints } from './api/endpoints';
import { consumeJobEvents } from './api/job-events';
import { Accounts } from './application/accounts';
import { ApiKeys } from './application/api-keys';
import { Credits } from './application/credits';
import { DashboardSessions } from './application/dashboard-sessions';
import { KeyUseRecorder } from './application/key-use';
import { UsageRecording } from './application/usage-recording';
import { UsageReports } from './application/usage-report';
import type { PlanCatalog } from './domain/plans';
import { DEFAULT_WEBHOOK_SECRET_GRACE_MS, SecretSealer } from './domain/webhook-secret';

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
  /** How long a dashboard session lasts from sign-in (config: `DASHBOARD_SESSION_TTL_MS`). */
  dashboardSessionTtlMs: number;
  /** How long a sign-in link can be redeemed (config: `SIGN_IN_LINK_TTL_MS`). */
  signInLinkTtlMs: number;
  /** The time periods and records are based on; tests move it. */
  now?: () => Date;
  metrics?: CreditMetrics;
}

/** Serves every billing endpoint and consumes job events; `stop` drains both. */
export async function startBillingService(
  dependencies: BillingDependencies,
): Promise<{ stop(): Promise<void> }> {
  const { db, plans, logger } = dependencies;
  const now = dependencies.now ?? (() => new Date());
  const accountStore = new AccountStore(db, plans, now);
  const keyStore = new KeyStore(db, now);
  const usageStore = new UsageStore(db);
  const accounts = new Accounts(
    accountStore,
    keyStore,
    usageStore,
    plans,
    new SecretSealer(dependencies.secretsEncryptionKey ?? null),
    dependencies.webhookSecretGraceMs ?? DEFAULT_WEBHOOK_SECRET_GRACE_MS,
    now,
    logger,
  );
  const keyUse = new KeyUseRecorder(keyStore, now, logger);
  const keys = new ApiKeys(keyStore, accountStore, plans, keyUse);
  const credits = new Credits(new CreditBook(accountStore, now), dependencies.metrics);
  const sessions = new DashboardSessions(
    new SignInLinkRepository(db),
    new SessionRepository(db),
    accountStore,
    keys,
    {
      sessionTtlMs: dependencies.dashboardSessionTtlMs,
      signInLinkTtlMs: dependencies.signInLinkTtlMs,
    },
    now,
    logger,
  );
  const usageReports = new UsageReports(accountStore, usageStore, now);

  const rpc = new Rpc(dependencies.nats, dependencies.topology, logger);
  const endpoints = await serveBillingEndpoints(rpc, {
    accounts,
    keys,
    credits,
    sessions,
    usageReports,
  });
  const events = await consumeJobEvents({
    nats: dependencies.nats,
    topology: dependencies.topology,
    logger,
    usage: new UsageRecording(usageStore),
  });
  return {
    async stop() {
      await endpoints.stop();
      await events.stop();
      await keyUse.settle();
    },
  };
}
