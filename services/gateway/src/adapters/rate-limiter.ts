import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  jetstream,
  jetstreamManager,
  type PubAck,
} from '@nats-io/jetstream';
import { Empty, headers as natsHeaders } from '@nats-io/nats-core';
import type { NatsConnection } from '@tamp/kit';
import type { Topology } from '@tamp/proto';
import type { Logger } from 'pino';

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the current window ends. */
  resetSeconds: number;
}

const WINDOW_MS = 60_000;

/** The header of a counter stream's publish that adds to its subject's total (ADR-49). */
const INCREMENT_HEADER = 'Nats-Incr';

/**
 * Fixed one-minute windows per account, counted in JetStream's REQUEST_COUNTS counter stream so
 * every gateway replica shares the count: one subject per account and window, added to with one
 * publish whose ack carries the new total. The server adds atomically, so replicas need no
 * compare-and-set and a hit costs one round trip (a KV counter needed a read and a guarded
 * write). The stream's max age sweeps old windows.
 */
export class RateLimiter {
  private readonly batches = new Map<string, PendingBatch>();
  private readonly js: JetStreamClient;

  constructor(
    nats: NatsConnection,
    private readonly topology: Topology,
    private readonly logger: Logger,
    private readonly clock: () => Date,
  ) {
    this.js = jetstream(nats);
  }

  async hit(accountId: string, limit: number): Promise<RateLimitDecision> {
    const now = this.clock().getTime();
    const window = Math.floor(now / WINDOW_MS);
    const resetSeconds = Math.max(1, Math.ceil(((window + 1) * WINDOW_MS - now) / 1000));
    const count = await this.increment(this.topology.subjects.requestCount(accountId, window));
    if (count === undefined) {
      // The counter store is unreachable: fail open rather than take the API down with it.
      return { allowed: true, limit, remaining: limit, resetSeconds };
    }
    return {
      allowed: count <= limit,
      limit,
      remaining: Math.max(0, limit - count),
      resetSeconds,
    };
  }

  /**
   * Adds one to the window's counter and answers the count this request got. A process keeps
   * at most one addition in flight per counter and adds everything that queued up meanwhile in
   * the next one, so publishes drop with concurrency instead of multiplying.
   */
  private increment(subject: string): Promise<number | undefined> {
    return new Promise((resolve) => {
      let batch = this.batches.get(subject);
      if (batch === undefined) {
        batch = { waiting: [], flushing: false };
        this.batches.set(subject, batch);
      }
      batch.waiting.push(resolve);
      if (!batch.flushing) void this.flush(subject, batch);
    });
  }

  private async flush(subject: string, batch: PendingBatch): Promise<void> {
    batch.flushing = true;
    while (batch.waiting.length > 0) {
      const waiting = batch.waiting.splice(0);
      const total = await this.add(subject, waiting.length);
      for (const [index, resolve] of waiting.entries()) {
        resolve(total === undefined ? undefined : total - waiting.length + index + 1);
      }
    }
    this.batches.delete(subject);
  }

  private async add(subject: string, amount: number): Promise<number | undefined> {
    const headers = natsHeaders();
    headers.set(INCREMENT_HEADER, `+${amount}`);
    try {
      const ack: PubAck & { val?: string } = await this.js.publish(subject, Empty, { headers });
      const total = Number(ack.val);
      if (Number.isSafeInteger(total)) return total;
      this.logger.warn({ subject, ack }, 'rate limit counter answered no total; allowing');
    } catch (error) {
      this.logger.warn({ err: error }, 'rate limit store failed; allowing the request');
    }
    return undefined;
  }
}

interface PendingBatch {
  waiting: Array<(count: number | undefined) => void>;
  flushing: boolean;
}

/**
 * Deletes the KV bucket in which releases before the counter stream counted requests. While a
 * rollout still runs old replicas, they find it gone and let their requests through (the limit
 * fails open, as when its store is down) until they are replaced.
 */
export async function retireRateLimitBucket(
  nats: NatsConnection,
  topology: Topology,
  logger: Logger,
): Promise<void> {
  const bucket = topology.namespace === '' ? 'RATE_LIMITS' : `${topology.namespace}_RATE_LIMITS`;
  try {
    await (await jetstreamManager(nats)).streams.delete(`KV_${bucket}`);
    logger.info({ bucket }, 'deleted the rate-limit KV bucket of an earlier release');
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)
      return;
    // Housekeeping only: a bucket left behind costs its (swept) stream, not correctness.
    logger.warn({ err: error, bucket }, 'could not delete the earlier rate-limit bucket');
  }
}
