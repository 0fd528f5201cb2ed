import {
  envPort,
  natsEnv,
  s3Env,
  serviceEnv,
  webhookTargetEnv,
  webhookTargetPolicyFrom,
} from '@tamp/kit';
import { LIMITS, type TargetPolicy } from '@tamp/proto';
import { z } from 'zod';
import type { HttpLimits } from './api/http-server';

const milliseconds = z.coerce.number().int().min(1_000).max(3_600_000);

export const configSchema = z.object({
  ...serviceEnv,
  ...natsEnv,
  /** Large inline text is stored in S3 before its job is created. */
  ...s3Env,
  /**
   * The webhook service's target policy, set to the same values here: a webhookUrl (a job's, or
   * an account default) that the policy refuses without DNS is refused when it is given.
   */
  ...webhookTargetEnv,
  /** Public API. */
  PORT: envPort.default(8080),
  /** Address the public API listens on. */
  HOST: z.string().default('0.0.0.0'),
  /**
   * The base URL customers reach the public API at (e.g. `https://api.example.com`, without
   * `/v1`): the server the OpenAPI document at /openapi.json names, so the reference page at
   * /docs sends "Try it out" requests there. Unset: the document names its own origin (`/`),
   * wherever it was fetched from.
   */
  PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** Admin API: internal only, never behind the public ingress. */
  ADMIN_PORT: envPort.default(8081),
  /** Address the admin API listens on (internal only). */
  ADMIN_HOST: z.string().default('127.0.0.1'),
  /** Bearer token of the admin API; unset → the admin API refuses every request. */
  ADMIN_TOKEN: z.string().min(16).optional(),
  /** How long an API key check is cached; capped at 4 s so revocation lands within 5 s. */
  AUTH_CACHE_TTL_MS: z.coerce.number().int().min(0).max(4_000).default(4_000),
  /**
   * Budget of one job creation, shared by every internal call made for it; past it the client
   * gets 503 with Retry-After (nothing created or charged) rather than a hang.
   */
  CREATE_JOB_BUDGET_MS: z.coerce
    .number()
    .int()
    .min(5_000)
    .max(120_000)
    .default(LIMITS.createJobBudgetMs),
  /**
   * Job creations one gateway replica forwards at once; more are shed at once with 503 and
   * Retry-After instead of queueing behind work that would miss its budget anyway.
   */
  MAX_CONCURRENT_CREATIONS: z.coerce.number().int().min(1).max(10_000).default(256),
  /**
   * Time for a request's line and headers to arrive (at most HTTP_REQUEST_TIMEOUT_MS). Past it
   * the client gets 408 REQUEST_TIMEOUT and the connection is closed.
   */
  HTTP_HEADERS_TIMEOUT_MS: milliseconds.default(10_000),
  /**
   * Time for a whole request, body included, to arrive; past it 408 REQUEST_TIMEOUT. The largest
   * body (24 MB of text) needs about 3.3 Mbit/s to make it; larger inputs belong in uploads.
   */
  HTTP_REQUEST_TIMEOUT_MS: milliseconds.default(60_000),
  /**
   * An idle kept-alive connection is closed after this. Longer than the 60 s idle timeout of
   * common load balancers, so they close first and never send on a connection being closed.
   */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: milliseconds.default(72_000),
  /**
   * A connection on which nothing moves for this long is destroyed (a client that stopped
   * reading its answer). Longer than a long-poll (30 s) or a creation (25 s) is silent.
   */
  HTTP_CONNECTION_TIMEOUT_MS: milliseconds.default(120_000),
  /** Connections the public API holds at once; Node drops new ones beyond it. */
  MAX_CONNECTIONS: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  /**
   * Connections one peer address may hold on the public API; beyond it, 429 RATE_LIMITED and
   * the connection is closed. 0: no limit, for a gateway behind an ingress or load balancer,
   * whose own addresses are the peers (limit clients there instead).
   */
  MAX_CONNECTIONS_PER_ADDRESS: z.coerce.number().int().min(0).max(1_000_000).default(256),
});
export type Config = z.output<typeof configSchema>;

export interface GatewaySettings {
  /** The public API's base URL, without a trailing slash; undefined: none configured. */
  publicUrl: string | undefined;
  /** Bearer token of the admin API; undefined: the admin API refuses every request. */
  adminToken: string | undefined;
  /** How long an API key check is cached. */
  authCacheTtlMs: number;
  /** Budget of one job creation, shared by every internal call made for it. */
  createJobBudgetMs: number;
  /** Job creations one replica forwards at once; more are shed with 503. */
  maxConcurrentCreations: number;
  /** Time and connection limits of both HTTP servers. */
  httpLimits: HttpLimits;
  /** Where webhooks may be sent: the webhook service's policy. */
  webhookTargets: TargetPolicy;
}

export function gatewaySettingsFrom(config: Config): GatewaySettings {
  return {
    publicUrl: config.PUBLIC_URL?.replace(/\/+$/, ''),
    adminToken: config.ADMIN_TOKEN,
    authCacheTtlMs: config.AUTH_CACHE_TTL_MS,
    createJobBudgetMs: config.CREATE_JOB_BUDGET_MS,
    maxConcurrentCreations: config.MAX_CONCURRENT_CREATIONS,
    httpLimits: {
      headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
      connectionTimeoutMs: config.HTTP_CONNECTION_TIMEOUT_MS,
      maxConnections: config.MAX_CONNECTIONS,
      maxConnectionsPerAddress: config.MAX_CONNECTIONS_PER_ADDRESS,
    },
    webhookTargets: webhookTargetPolicyFrom(config),
  };
}
