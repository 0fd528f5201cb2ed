/** A billing period: `start` inclusive, `end` exclusive. */
export interface BillingPeriod {
  start: Date;
  end: Date;
}

export const CYCLE_MS = 30 * 24 * 60 * 60 * 1000;

/**
 * The period containing `now`: 30-day cycles counted from the account's `billingCycleAnchor`
 * (also backwards, should `now` precede the anchor) when it is set, else the UTC calendar month.
 */
export function billingPeriodAt(now: Date, billingCycleAnchor: Date | null): BillingPeriod {
  if (billingCycleAnchor !== null) {
    const anchor = billingCycleAnchor.getTime();
    const cycles = Math.floor((now.getTime() - anchor) / CYCLE_MS);
    const start = anchor + cycles * CYCLE_MS;
    return { start: new Date(start), end: new Date(start + CYCLE_MS) };
  }
  const year = now.getUTCFullYear();
  const month = now.getUTCMonth();
  return { start: new Date(Date.UTC(year, month, 1)), end: new Date(Date.UTC(year, month + 1, 1)) };
}

/** Clock skew tolerated when an operator sets the anchor to "now" as read on another machine. */
export const ANCHOR_CLOCK_SKEW_MS = 60_000;

/**
 * Why `anchor` cannot become an account's `billingCycleAnchor` at `now`, or null when it can.
 * Any past instant is fine (cycles are counted forward from it). A future one is refused: the
 * current period would be a cycle counted backwards from a day that has not come, which is never
 * what an operator means; set the anchor once that day has come instead.
 */
export function billingCycleAnchorProblem(anchor: Date, now: Date): string | null {
  if (Number.isNaN(anchor.getTime())) return 'must be an ISO-8601 instant';
  if (anchor.getTime() > now.getTime() + ANCHOR_CLOCK_SKEW_MS) {
    return `must not be in the future (now is ${now.toISOString()})`;
  }
  return null;
}

/**
 * An account's credits as of `now`, without writing: when a new period has started since the
 * allowance was last touched, the allowance is the plan's (the rollover the next posting makes).
 */
export function creditsNow(
  account: {
    periodStart: Date;
    billingCycleAnchor: Date | null;
    allowanceRemaining: number;
    grantedRemaining: number;
  },
  creditsPerPeriod: number,
  now: Date,
): { allowanceRemaining: number; grantedRemaining: number; available: number } {
  const period = billingPeriodAt(now, account.billingCycleAnchor);
  const allowanceRemaining =
    period.start.getTime() > account.periodStart.getTime()
      ? creditsPerPeriod
      : account.allowanceRemaining;
  return {
    allowanceRemaining,
    grantedRemaining: account.grantedRemaining,
    available: allowanceRemaining + account.grantedRemaining,
  };
}
