import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { type KV, type NatsConnection, openKvBucket, type StreamReplicas } from '@tamp/kit';
import type { Logger } from 'pino';

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the current window ends. */
  resetSeconds: number;
}

const WINDOW_MS = 60_000;
const MAX_CAS_ATTEMPTS = 25;

/**
 * Fixed one-minute windows per account, counted in a JetStream KV bucket so every gateway
 * replica shares the count: key `<accountId>.<window>`, incremented with create / update on
 * the revision (compare-and-set). The bucket's max age (2 min) sweeps old windows; no
 * per-message TTL is needed (that needs nats-server 2.11 or later and a bucket made for it).
 */
export class KvRateLimiter {
  private readonly batches = new Map<string, PendingBatch>();

  private constructor(
    private readonly kv: KV,
    private readonly logger: Logger,
    private readonly clock: () => Date,
  ) {}

  static async open(options: {
    nats: NatsConnection;
    bucket: string;
    /** Copies of the bucket, as every stream has (kit's NATS_STREAM_REPLICAS). */
    replicas: StreamReplicas;
    logger: Logger;
    clock: () => Date;
  }): Promise<KvRateLimiter> {
    const kv = await openKvBucket(options.nats, options.bucket, {
      history: 1,
      ttlMs: 2 * WINDOW_MS,
      replicas: options.replicas,
    });
    return new KvRateLimiter(kv, options.logger, options.clock);
  }

  async hit(accountId: string, limit: number): Promise<RateLimitDecision> {
    const now = this.clock().getTime();
    const window = Math.floor(now / WINDOW_MS);
    const resetSeconds = Math.max(1, Math.ceil(((window + 1) * WINDOW_MS - now) / 1000));
    const count = await this.increment(`${accountId}.${window}`);
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
   * Adds one to the window's counter and answers the count this request got. Concurrent
   * requests of one account would race each other's compare-and-set on the same key, so a
   * process keeps at most one update in flight per key and adds everything that queued up
   * meanwhile in that one update: counts stay exact across replicas, and KV round trips drop
   * with concurrency instead of multiplying.
   */
  private increment(key: string): Promise<number | undefined> {
    return new Promise((resolve) => {
      let batch = this.batches.get(key);
      if (batch === undefined) {
        batch = { waiting: [], flushing: false };
        this.batches.set(key, batch);
      }
      batch.waiting.push(resolve);
      if (!batch.flushing) void this.flush(key, batch);
    });
  }

  private async flush(key: string, batch: PendingBatch): Promise<void> {
    batch.flushing = true;
    while (batch.waiting.length > 0) {
      const waiting = batch.waiting.splice(0);
      const total = await this.add(key, waiting.length);
      for (const [index, resolve] of waiting.entries()) {
        resolve(total === undefined ? undefined : total - waiting.length + index + 1);
      }
    }
    this.batches.delete(key);
  }

  private async add(key: string, amount: number): Promise<number | undefined> {
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      try {
        const entry = await this.kv.get(key);
        if (entry === null || entry.operation !== 'PUT') {
          await this.kv.create(key, String(amount));
          return amount;
        }
        const next = Number(entry.string()) + amount;
        await this.kv.update(key, String(next), entry.revision);
        return next;
      } catch (error) {
        if (isConflict(error)) continue;
        this.logger.warn({ err: error }, 'rate limit store failed; allowing the request');
        return undefined;
      }
    }
    this.logger.warn({ key }, 'rate limit counter too contended; allowing the request');
    return undefined;
  }
}

interface PendingBatch {
  waiting: Array<(count: number | undefined) => void>;
  flushing: boolean;
}

/** Another update won the compare-and-set (the key's last sequence moved on). */
function isConflict(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === JetStreamApiCodes.StreamWrongLastSequence ||
      error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}
