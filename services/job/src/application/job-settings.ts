/** Tunables; defaults come from config.ts (and proto's LIMITS). */
export interface JobSettings {
  /** Base of the retry backoff: attempt n waits base × 2^(n-1) at most (equal jitter). */
  retryBaseMs: number;
  /** How long an inline worker may take before the job is queued instead. */
  inlineReplyTimeoutMs: number;
  /** How long a concurrent twin of a keyed request waits for the claimed job to appear. */
  idempotencyWaitMs: number;
  /** A claim this old without its job is taken to be orphaned (its claimant died). */
  idempotencyStaleMs: number;
  /** How old unfinished side effects (unpublished work, refunds, events) must be to be redone. */
  reconcileAfterMs: number;
  /**
   * How long after its deadline an open admission is taken as abandoned and its reservation
   * released. Well above any delay between a creation's last deadline check and its store.
   */
  abandonAfterMs: number;
  /** How often the sweepers run; 0 disables the timer (tests run them by hand). */
  sweepIntervalMs: number;
  /** HMAC key of list cursors; must be the same on every replica. */
  cursorSecret: string;
}
