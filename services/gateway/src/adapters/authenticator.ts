import { createHash } from 'node:crypto';
import type { Rpc } from '@tamp/kit';
import { type AccountLimits, billingEndpoints, ServiceError } from '@tamp/proto';
import { LRUCache } from 'lru-cache';

export type AuthenticatedAccount = AccountLimits & { keyId: string };

/** Revocation must reach every replica within 5 s: cached answers live at most this long. */
export const MAX_AUTH_CACHE_TTL_MS = 4_000;
/**
 * Keys cached at once: far more than the distinct keys a replica sees within a TTL, while a
 * flood of made-up keys (each a negative entry) cannot grow the cache without bound.
 */
const MAX_CACHED_KEYS = 10_000;

type CacheEntry = { account: AuthenticatedAccount } | { rejected: ServiceError };

/**
 * Verifies API keys with billing and caches the answer (positive and negative) for a short TTL,
 * keyed by the key's SHA-256 so full keys are not kept in memory longer than a request.
 * Concurrent requests with one key share one lookup (the cache's fetch); UNAVAILABLE is never
 * cached (a rejected fetch leaves nothing behind).
 */
export class Authenticator {
  private readonly cache: LRUCache<string, CacheEntry, string>;

  constructor(
    private readonly rpc: Rpc,
    options: { ttlMs: number },
  ) {
    const ttl = Math.min(options.ttlMs, MAX_AUTH_CACHE_TTL_MS);
    this.cache = new LRUCache({
      max: MAX_CACHED_KEYS,
      ttl,
      ttlAutopurge: false,
      // An evicted entry's lookup still answers the requests waiting for it.
      ignoreFetchAbort: true,
      fetchMethod: (_cacheKey, _stale, { context: apiKey }) => this.lookup(apiKey),
    });
  }

  async authenticate(apiKey: string): Promise<AuthenticatedAccount> {
    const cacheKey = createHash('sha256').update(apiKey).digest('hex');
    const entry = await this.cache.fetch(cacheKey, { context: apiKey });
    if (entry === undefined) throw new ServiceError('UNAVAILABLE', 'Authentication is unavailable');
    if ('rejected' in entry) throw entry.rejected;
    return entry.account;
  }

  private async lookup(apiKey: string): Promise<CacheEntry> {
    try {
      return { account: await this.rpc.call(billingEndpoints.authenticate, { apiKey }) };
    } catch (error) {
      if (error instanceof ServiceError && error.code === 'UNAUTHORIZED') {
        return { rejected: error };
      }
      throw error;
    }
  }
}
