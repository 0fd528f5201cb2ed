/**
 * Delay before retrying after failed attempt number `attempt` (1-based): base × 2^(attempt-1),
 * so with the default 2 s base the retries wait 2 s, 4 s and 8 s.
 */
export function retryDelayMs(baseMs: number, attempt: number): number {
  return baseMs * 2 ** (Math.max(1, attempt) - 1);
}
