/**
 * Nominal delay before retrying after failed attempt number `attempt` (1-based):
 * base × 2^(attempt-1), so with the default 2 s base the retries wait at most 2 s, 4 s and 8 s;
 * decideFailure applies equal jitter to it (between half of it and all of it).
 */
export function retryDelayMs(baseMs: number, attempt: number): number {
  return baseMs * 2 ** (Math.max(1, attempt) - 1);
}
