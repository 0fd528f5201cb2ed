import type { NatsConnection } from '@nats-io/nats-core';
import {
  httpMetrics,
  jobCreationMetrics,
  type ObjectStore,
  type Registry,
  type Rpc,
} from '@tamp/kit';
import { LIMITS, PRODUCTION_POLICY, type TargetPolicy, type Topology } from '@tamp/proto';
import type { Logger } from 'pino';
import { Authenticator, MAX_AUTH_CACHE_TTL_MS } from './adapters/authenticator';
import { JobWaiters } from './adapters/job-waiters';
import { KvRateLimiter } from './adapters/rate-limiter';
import { buildAdminApp, buildPublicApp } from './api/app';
import { DEFAULT_HTTP_LIMITS, type HttpLimits } from './api/http-server';
import { FileCompressions } from './application/file-compression';
import { JobReads } from './application/job-reads';
import { JobSubmissions } from './application/job-submission';

export interface GatewayDependencies {
  logger: Logger;
  nats: NatsConnection;
  topology: Topology;
  rpc: Rpc;
  objectStore: ObjectStore;
  adminToken: string | undefined;
  /** ≤ 4 s (revocation reaches every replica within 5 s); tests shorten it. */
  authCacheTtlMs?: number;
  createJobBudgetMs?: number;
  maxConcurrentCreations?: number;
  /** The service's registry: requests by route and jobs created (see kit's metrics). */
  metrics?: Registry;
  /** Time and connection limits of both HTTP servers; DEFAULT_HTTP_LIMITS when absent. */
  httpLimits?: HttpLimits;
  /** Where webhooks may be sent (the webhook service's policy); production's when absent. */
  webhookTargets?: TargetPolicy;
}

export interface Gateway {
  publicApp: Awaited<ReturnType<typeof buildPublicApp>>;
  adminApp: Awaited<ReturnType<typeof buildAdminApp>>;
  waiters: JobWaiters;
  /** Wakes long-polls, closes both apps, drops the notification subscription. */
  stop(): Promise<void>;
}

/** KV bucket of the rate-limit counters, namespaced like every stream. */
export function rateLimitBucket(topology: Topology): string {
  return topology.namespace === '' ? 'RATE_LIMITS' : `${topology.namespace}_RATE_LIMITS`;
}

/** Builds both apps (not listening) around one notification hub and one shared limiter. */
export async function startGatewayService(dependencies: GatewayDependencies): Promise<Gateway> {
  const { logger, nats, topology, rpc, objectStore } = dependencies;
  const waiters = new JobWaiters(nats, topology, logger);
  await waiters.start();
  const limiter = await KvRateLimiter.open({ nats, bucket: rateLimitBucket(topology), logger });
  const authenticator = new Authenticator(rpc, {
    ttlMs: dependencies.authCacheTtlMs ?? MAX_AUTH_CACHE_TTL_MS,
  });
  const metrics = dependencies.metrics;
  const requests = metrics && httpMetrics(metrics);
  const httpLimits = dependencies.httpLimits ?? DEFAULT_HTTP_LIMITS;
  const webhookTargets = dependencies.webhookTargets ?? PRODUCTION_POLICY;
  const jobSubmissions = new JobSubmissions({
    rpc,
    objectStore,
    budgetMs: dependencies.createJobBudgetMs ?? LIMITS.createJobBudgetMs,
    maxConcurrent: dependencies.maxConcurrentCreations ?? 256,
    jobsCreated: metrics && jobCreationMetrics(metrics),
  });
  const publicApp = await buildPublicApp({
    logger,
    httpMetrics: requests,
    httpLimits,
    webhookTargets,
    rpc,
    jobReads: new JobReads(rpc, waiters),
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
    adminToken: dependencies.adminToken,
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
