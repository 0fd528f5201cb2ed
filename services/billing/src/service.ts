import { type CreditMetrics, type Db, type Logger, type NatsConnection, Rpc } from '@tamp/kit';
import type { Topology } from '@tamp/proto';
import { AccountNotifications } from './adapters/account-notifications';
import { AccountRepository } from './adapters/account-repository';
import { ApiKeyRepository } from './adapters/api-key-repository';
import { LedgerRepository } from './adapters/ledger-repository';
import { SessionRepository } from './adapters/session-repository';
import { SignInLinkRepository } from './adapters/sign-in-link-repository';
import { UsageRepository } from './adapters/usage-repository';
import { serveBillingEndpoints } from './api/endpoints';
import { consumeJobEvents } from './api/job-events';
import { AccountPeriods } from './application/account-periods';
import { Accounts } from './application/accounts';
import { ApiKeys } from './application/api-keys';
import { CreditPostings } from './application/credit-postings';
import { Credits } from './application/credits';
import { DashboardSessions } from './application/dashboard-sessions';
import { KeyUseRecorder } from './application/key-use';
import { UsageRecording } from './application/usage-recording';
import { UsageReports } from './application/usage-report';
import type { BillingSettings } from './config';
import type { PlanCatalog } from './domain/plans';
import { SecretSealer } from './domain/webhook-secret';

export interface BillingDependencies {
  nats: NatsConnection;
  topology: Topology;
  /** Must be owned by this service alone (see kit's connectMongo on FerretDB). */
  db: Db;
  logger: Logger;
  /** From billingSettingsFrom (config.ts); tests change single values. */
  settings: BillingSettings;
  /** The time periods and records are based on; tests move it. */
  clock?: () => Date;
  metrics?: CreditMetrics;
}

/**
 * The credits application with its repositories over `db`, as one billing replica runs it (its
 * postings keep their own last known account states); tests compose a second replica with it.
 */
export function composeCredits(
  db: Db,
  options: {
    plans: PlanCatalog;
    clock: () => Date;
    logger: Logger;
    metrics?: CreditMetrics | undefined;
  },
): { credits: Credits; postings: CreditPostings } {
  const { plans, clock, logger } = options;
  const accounts = new AccountRepository(db);
  const ledger = new LedgerRepository(db);
  const periods = new AccountPeriods(accounts, ledger, plans, clock);
  const postings = new CreditPostings(accounts, ledger, periods, clock, logger);
  return {
    credits: new Credits(postings, accounts, ledger, periods, clock, options.metrics),
    postings,
  };
}

/** Serves every billing endpoint and consumes job events; `stop` drains both. */
export async function startBillingService(
  dependencies: BillingDependencies,
): Promise<{ stop(): Promise<void> }> {
  const { db, logger, settings } = dependencies;
  const { plans } = settings;
  const clock = dependencies.clock ?? (() => new Date());
  const accountRepository = new AccountRepository(db);
  const apiKeyRepository = new ApiKeyRepository(db);
  const usage = new UsageRepository(db);
  const keyUse = new KeyUseRecorder(apiKeyRepository, clock, logger);
  const keys = new ApiKeys(apiKeyRepository, accountRepository, plans, keyUse, clock);
  const accounts = new Accounts(
    accountRepository,
    keys,
    usage,
    plans,
    new SecretSealer(settings.secretsEncryptionKey),
    settings.webhookSecretGraceMs,
    clock,
    logger,
    new AccountNotifications(dependencies.nats, dependencies.topology, logger),
  );
  const { credits, postings } = composeCredits(db, {
    plans,
    clock,
    logger,
    metrics: dependencies.metrics,
  });
  const sessions = new DashboardSessions(
    new SignInLinkRepository(db),
    new SessionRepository(db),
    accountRepository,
    keys,
    {
      sessionTtlMs: settings.dashboardSessionTtlMs,
      signInLinkTtlMs: settings.signInLinkTtlMs,
    },
    clock,
    logger,
  );
  const usageReports = new UsageReports(accountRepository, usage, clock);

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
    usage: new UsageRecording(usage),
  });
  return {
    async stop() {
      await endpoints.stop();
      await events.stop();
      await keyUse.settle();
      await postings.settle();
    },
  };
}
