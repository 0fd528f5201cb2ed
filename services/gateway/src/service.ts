import type { NatsConnection } from '@nats-io/nats-core';
import {
  httpMetrics,
  jobCreationMetrics,
  type ObjectStore,
  type Registry,
  type Rpc,
} from '@tamp/kit';
import type { Topology } from '@tamp/proto';
import type { Logger } from 'pino';
import { Authenticator } from './adapters/authenticator';
import { JobWaiters } from './adapters/job-waiters';
import { RateLimiter, retireRateLimitBucket } from './adapters/rate-limiter';
import { buildAdminApp, buildPublicApp } from './api/app';
import { FileCompressions } from './application/file-compression';
import { JobReads } from './application/job-reads';
import { JobSubmissions } from './application/job-submission';
import type { GatewaySettings } from './config';

export interface GatewayDependencies {
  logger: Logger;
  nats: NatsConnection;
  topology: Topology;
  rpc: Rpc;
  objectStore: ObjectStore;
  /** From gatewaySettingsFrom (config.ts); tests change single values. */
  settings: GatewaySettings;
  /** The service's registry: requests by route and jobs created (see kit's metrics). */
  metrics?: Registry;
  /** The rate limiter's clock, which picks the one-minute window a request counts in. */
  clock?: () => Date;
}

export interface Gateway {
  publicApp: Awaited<ReturnType<typeof buildPublicApp>>;
  adminApp: Awaited<ReturnType<typeof buildAdminApp>>;
  waiters: JobWaiters;
  /** Wakes long-polls, closes both apps, drops the notification subscription. */
  stop(): Promise<void>;
}

/** Builds both apps (not listening) around one notification hub and one shared limiter. */
export async function startGatewayService(dependencies: GatewayDependencies): Promise<Gateway> {
  const { logger, nats, topology, rpc, objectStore, settings } = dependencies;
  const { httpLimits, webhookTargets } = settings;
  const waiters = new JobWaiters(nats, topology, logger);
  await waiters.start();
  await retireRateLimitBucket(nats, topology, logger);
  const limiter = new RateLimiter(nats, topology, logger, dependencies.clock ?? (() => new Date()));
  const authenticator = new Authenticator(rpc, { ttlMs: settings.authCacheTtlMs });
  const metrics = dependencies.metrics;
  const requests = metrics && httpMetrics(metrics);
  const jobSubmissions = new JobSubmissions({
    rpc,
    objectStore,
    budgetMs: settings.createJobBudgetMs,
    maxConcurrent: settings.maxConcurrentCreations,
    jobsCreated: metrics && jobCreationMetrics(metrics),
  });
  const publicApp = await buildPublicApp({
    logger,
    publicUrl: settings.publicUrl,
    httpMetrics: requests,
    httpLimits,
    webhookTargets,
    rpc,
    jobReads: new JobReads(rpc, waiters, objectStore),
    jobSubmissions,
    fileCompressions: new FileCompressions(rpc, objectStore, jobSubmissions),
    authenticator,
    limiter,
  });
  // Long-polls answer at once when the server starts closing, instead of holding shutdown.
  publicApp.addHook('preClose', async () => waiters.wakeAll());
  const adminApp = await buildAdminApp({
    logger: logger.child({ api: 'admin' }),
    httpMetrics: requests,
    httpLimits,
    webhookTargets,
    rpc,
    adminToken: settings.adminToken,
  });
  await Promise.all([publicApp.ready(), adminApp.ready()]);
  return {
    publicApp,
    adminApp,
    waiters,
    async stop() {
      waiters.wakeAll();
      await Promise.all([publicApp.close(), adminApp.close()]);
      await waiters.stop();
    },
  };
}
