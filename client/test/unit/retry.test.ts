import { describe, expect, it } from 'vitest';
import { apiErrorOf, apiErrorOfStatus } from '../../src/errors';
import {
  DEFAULT_RETRY_POLICY,
  parseRetryAfter,
  retryDelayMs,
  retryReasonOf,
} from '../../src/retry';

const error = (code: string, status: number) => apiErrorOf(code, { message: code, status });

describe('what is retried', () => {
  it.each([
    ['RATE_LIMITED', 429, false, 'RATE_LIMITED'],
    ['RATE_LIMITED', 429, true, 'RATE_LIMITED'],
    ['IDEMPOTENCY_KEY_IN_USE', 409, false, 'IDEMPOTENCY_KEY_IN_USE'],
    ['UNAVAILABLE', 503, true, 'UNAVAILABLE'],
    ['UNAVAILABLE', 503, false, undefined],
    ['INTERNAL', 500, true, undefined],
    ['INSUFFICIENT_CREDITS', 402, true, undefined],
    ['VALIDATION_ERROR', 400, true, undefined],
  ] as const)('%s (%i), repeatable %s → %s', (code, status, repeatable, reason) => {
    expect(retryReasonOf(error(code, status), repeatable)).toBe(reason);
  });

  it('network failures only when the request is repeatable; never a caller abort', () => {
    const refused = new TypeError('fetch failed');
    expect(retryReasonOf(refused, true)).toBe('network');
    expect(retryReasonOf(refused, false)).toBeUndefined();
    const timeout = new DOMException('timed out', 'TimeoutError');
    expect(retryReasonOf(timeout, true)).toBe('network');
    expect(retryReasonOf(new DOMException('stop', 'AbortError'), true)).toBeUndefined();
  });

  it('a proxy error page counts by its status', () => {
    expect(apiErrorOfStatus(502, { message: 'bad gateway' }).code).toBe('UNAVAILABLE');
    expect(apiErrorOfStatus(429, { message: 'slow down' }).code).toBe('RATE_LIMITED');
    expect(apiErrorOfStatus(418, { message: 'teapot' }).code).toBe('HTTP_418');
  });
});

describe('how long to wait', () => {
  it('Retry-After is a minimum, with at most a second of jitter', () => {
    expect(retryDelayMs(1, 12, DEFAULT_RETRY_POLICY, () => 0)).toBe(12_000);
    expect(retryDelayMs(1, 12, DEFAULT_RETRY_POLICY, () => 1)).toBe(13_000);
    expect(retryDelayMs(1, 2, DEFAULT_RETRY_POLICY, () => 1)).toBe(2_200);
  });

  it('draws whole milliseconds inside the bands, a Retry-After of 0 included', () => {
    expect(retryDelayMs(1, 0, DEFAULT_RETRY_POLICY, () => 1)).toBe(0);
    expect(retryDelayMs(1, 30, DEFAULT_RETRY_POLICY, () => 0.5)).toBe(30_500);
    expect(retryDelayMs(2, undefined, DEFAULT_RETRY_POLICY, () => 0.3333)).toBe(333);
    for (let retry = 1; retry <= 8; retry++) {
      const delay = retryDelayMs(retry, undefined, DEFAULT_RETRY_POLICY)!;
      expect(Number.isInteger(delay)).toBe(true);
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThanOrEqual(Math.min(20_000, 500 * 2 ** (retry - 1)));
    }
  });

  it('a Retry-After beyond the policy is not waited for', () => {
    expect(retryDelayMs(1, 3600, DEFAULT_RETRY_POLICY)).toBeUndefined();
  });

  it('backoff doubles from the base, capped, with full jitter', () => {
    const top = (retry: number) => retryDelayMs(retry, undefined, DEFAULT_RETRY_POLICY, () => 1);
    expect([1, 2, 3, 4, 10].map(top)).toEqual([500, 1000, 2000, 4000, 20_000]);
    expect(retryDelayMs(3, undefined, DEFAULT_RETRY_POLICY, () => 0)).toBe(0);
  });

  it('parses Retry-After as seconds or an HTTP date', () => {
    const nowMs = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('7', nowMs)).toBe(7);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', nowMs)).toBe(30);
    expect(parseRetryAfter('Wed, 31 Dec 2025 00:00:00 GMT', nowMs)).toBe(0);
    expect(parseRetryAfter('soon', nowMs)).toBeUndefined();
    expect(parseRetryAfter(null, nowMs)).toBeUndefined();
  });
});
