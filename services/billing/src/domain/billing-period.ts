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
