import { setTimeout as sleep } from 'node:timers/promises';
import { exponentialDelayMs, jitteredDelayMs, type RandomSource, ServiceError } from '@tamp/proto';
import type { Logger } from 'pino';

const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 5_000;

/**
 * Calls the job service on behalf of a delivery this worker holds, until it answers. A job
 * service that is unreachable, overloaded or slow (UNAVAILABLE, which is also what a time-out
 * becomes) says nothing about the job, so it must never cost one of the job's attempts: the
 * worker keeps the delivery (its lease is extended meanwhile) and asks again, with backoff:
 * 0.5 s doubling up to 5 s, with equal jitter (proto's backoff.ts), so the workers that lost the
 * job service together do not all ask again at the same moment when it comes back.
 * Every call it repeats is idempotent on the job service's side for the same delivery. Other
 * errors are answers and are thrown; `signal` (the worker stopping) ends the wait.
 */
export async function untilAnswered<T>(
  call: () => Promise<T>,
  options: { signal: AbortSignal; logger: Logger; what: string; random?: RandomSource },
): Promise<T> {
  for (let retry = 0; ; retry++) {
    options.signal.throwIfAborted();
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof ServiceError) || error.code !== 'UNAVAILABLE') throw error;
      const delay = jitteredDelayMs(
        exponentialDelayMs(FIRST_RETRY_MS, retry, MAX_RETRY_MS),
        options.random ?? Math.random,
      );
      if (retry === 0 || retry % 10 === 0) {
        options.logger.warn(
          { err: error, retry },
          `${options.what}: the job service did not answer; the delivery is kept and asked again`,
        );
      }
      await sleep(delay, undefined, { signal: options.signal }).catch(() => undefined);
    }
  }
}
