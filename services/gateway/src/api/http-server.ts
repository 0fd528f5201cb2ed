import type { ServerOptions } from 'node:http';

/**
 * How long a client may take and how many connections it may hold: the gateway's HTTP_* and
 * MAX_CONNECTIONS* variables (src/config.ts says what each one is for).
 */
export interface HttpLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  connectionTimeoutMs: number;
  maxConnections: number;
  /** 0: no limit per peer address. */
  maxConnectionsPerAddress: number;
}

/**
 * Node checks the header and request deadlines of open connections on a timer (every 30 s by
 * default), so a deadline is enforced up to that late; checking a few times per deadline keeps
 * the 408 close to when it is due, at the cost of one pass over the connections per period.
 */
const CHECKS_PER_DEADLINE = 4;
const MAX_CHECKING_INTERVAL_MS = 1_000;

/** The fastify and Node HTTP server options that enforce `limits`. */
export function httpServerOptions(limits: HttpLimits): {
  requestTimeout: number;
  keepAliveTimeout: number;
  connectionTimeout: number;
  http: ServerOptions;
} {
  // Node refuses a header deadline later than the whole request's.
  const headersTimeout = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  return {
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionTimeout: limits.connectionTimeoutMs,
    http: {
      headersTimeout,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(
        MAX_CHECKING_INTERVAL_MS,
        Math.ceil(headersTimeout / CHECKS_PER_DEADLINE),
      ),
      // Node answers a request without Host with a bare 400; let it through, and the envelope
      // plugin answers it with the error envelope instead.
      requireHostHeader: false,
    },
  };
}
