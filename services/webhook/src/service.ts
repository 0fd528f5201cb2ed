import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import {
  type Db,
  type Logger,
  type NatsConnection,
  provisionIndexes,
  type Registry,
  type Rpc,
} from '@tamp/kit';
import type { Topology } from '@tamp/proto';
import { AttemptRepository } from './adapters/attempt-repository';
import { BillingAccounts } from './adapters/billing-accounts';
import { DeliveryRepository, WEBHOOK_INDEXES } from './adapters/delivery-repository';
import { FinishedJobs } from './adapters/finished-jobs';
import type { HostnameResolver } from './adapters/hostname-resolver';
import { serveWebhookEndpoints } from './api/endpoints';
import { consumeJobEvents } from './api/job-events';
import { DeliveryAttempt, SignedSender } from './application/delivery-attempt';
import { DeliveryIntake } from './application/delivery-intake';
import { DeliveryLog } from './application/delivery-log';
import { DeliveryScheduler } from './application/delivery-scheduler';
import { TestDelivery } from './application/test-delivery';
import { WebhookMetrics } from './application/webhook-metrics';
import type { WebhookSettings } from './config';

/**
 * A claimed attempt's lease is its deadline plus this margin, so another instance takes over
 * only an attempt whose instance died, never one still running or being recorded.
 */
const LEASE_MARGIN_MS = 30_000;

export interface WebhookServiceOptions {
  nats: NatsConnection;
  topology: Topology;
  rpc: Rpc;
  db: Db;
  /** From webhookSettingsFrom (config.ts); tests change single values. */
  settings: WebhookSettings;
  logger: Logger;
  metrics: Registry;
  /** Now; injectable for tests. */
  clock?: () => Date;
  /** Jitter source for `nextRetryDelay`. */
  random?: () => number;
  /** Recorded with every attempt; default `<hostname>:<pid>:<random>`. */
  instanceId?: string;
  /** Tests inject a fake DNS; production uses the system resolver. */
  resolveHostname?: HostnameResolver;
}

export interface WebhookService {
  /** Stops consuming and polling, waits for attempts in flight, unsubscribes the endpoints. */
  stop(): Promise<void>;
}

/**
 * The webhook service: turns `events.job.*` into one durable delivery sequence per job event
 * (in `webhook_deliveries`), delivers it with signed, retried, policy-checked attempts (each
 * recorded in `webhook_attempts`), and serves `listDeliveries` / `redeliver` / `sendTestDelivery`.
 */
export async function startWebhookService(options: WebhookServiceOptions): Promise<WebhookService> {
  const { nats, topology, rpc, db, settings, logger } = options;
  const { targetPolicy: policy, timeoutMs, unavailableRetryMs } = settings;
  const clock = options.clock ?? (() => new Date());
  const instance = options.instanceId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

  await provisionIndexes(db, WEBHOOK_INDEXES);
  const deliveries = new DeliveryRepository(db);
  const attempts = new AttemptRepository(db);
  const accounts = new BillingAccounts(rpc, nats, topology, logger);
  await accounts.start();
  const metrics = new WebhookMetrics(options.metrics, deliveries, logger);
  const attempt = new DeliveryAttempt(
    deliveries,
    attempts,
    accounts,
    metrics,
    {
      retryScheduleMs: [...settings.retryScheduleMs],
      policy,
      timeoutMs,
      unavailableRetryMs,
      instance,
      resolveHostname: options.resolveHostname,
    },
    clock,
    options.random ?? Math.random,
    logger,
  );
  const scheduler = new DeliveryScheduler(
    deliveries,
    attempt,
    {
      pollIntervalMs: settings.pollIntervalMs,
      leaseMs: timeoutMs + LEASE_MARGIN_MS,
      maxConcurrentAttempts: settings.maxConcurrentAttempts,
    },
    clock,
    logger,
  );

  const events = await consumeJobEvents({
    nats,
    topology,
    intake: new DeliveryIntake(deliveries, accounts, clock, logger, () => scheduler.wake()),
    retryDelayMs: unavailableRetryMs,
    logger,
  });
  scheduler.begin();
  // The dashboard's test delivery: one attempt through the same sender, policy and deadline.
  const testDelivery = new TestDelivery(
    accounts,
    new FinishedJobs(rpc),
    new SignedSender({ policy, timeoutMs, resolveHostname: options.resolveHostname }, clock),
    attempts,
    instance,
    logger,
  );
  const endpoints = await serveWebhookEndpoints(rpc, {
    log: new DeliveryLog(deliveries, attempts, clock, logger),
    testDelivery,
  });
  logger.info(
    { instance, schedule: settings.retryScheduleMs, timeoutMs, policy },
    'webhook service started',
  );

  let stopping: Promise<void> | undefined;
  return {
    stop() {
      stopping ??= (async () => {
        metrics.close();
        await Promise.all([endpoints.stop(), events.stop(), scheduler.stop()]);
        accounts.stop();
      })();
      return stopping;
    },
  };
}
