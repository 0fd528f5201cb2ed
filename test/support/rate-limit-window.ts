import { vi } from 'vitest';

/**
 * The gateway's rate limiter (services/gateway/src/adapters/rate-limiter.ts) counts each
 * account's requests in fixed one-minute windows of the epoch: window `floor(now / 60 s)`.
 */
export const RATE_LIMIT_WINDOW_MS = 60_000;

function windowOf(at: number): number {
  return Math.floor(at / RATE_LIMIT_WINDOW_MS);
}

/**
 * Resolves once the rate limiter's current window has at least `roomMs` left: at once, or when
 * the next window has begun. A test whose requests must all be counted in one window calls it
 * just before sending them, so they cannot straddle a window boundary (where the count starts
 * again). It reads this machine's clock, which is the limiter's too: the gateways of the tests
 * run on this machine and default to the system clock.
 */
export async function rateLimitWindowWithRoom(roomMs: number): Promise<void> {
  if (roomMs > RATE_LIMIT_WINDOW_MS / 2) throw new Error(`no window has ${roomMs} ms to spare`);
  const now = Date.now();
  const window = windowOf(now);
  if ((window + 1) * RATE_LIMIT_WINDOW_MS - now >= roomMs) return;
  await vi.waitFor(
    () => {
      if (windowOf(Date.now()) === window) throw new Error('the rate-limit window has not turned');
    },
    { timeout: roomMs + 5_000, interval: 50 },
  );
}
