/**
 * How a posting changes an account's two credit buckets: the period allowance (reset at every
 * period start) and operator-granted credits (never expire). Negative takes, positive gives.
 */
export interface CreditMovement {
  allowance: number;
  granted: number;
}

export interface CreditBalance {
  allowanceRemaining: number;
  grantedRemaining: number;
}

/** Allowance first, then granted credits; null when both together are short (nothing is taken). */
export function reservationMovement(
  balance: CreditBalance,
  credits: number,
): CreditMovement | null {
  if (balance.allowanceRemaining + balance.grantedRemaining < credits) return null;
  const fromAllowance = Math.min(Math.max(balance.allowanceRemaining, 0), credits);
  // `0 - x` rather than `-x`: no negative zeros in stored movements.
  return { allowance: 0 - fromAllowance, granted: fromAllowance - credits };
}

/**
 * Gives back exactly what a reservation took, to the bucket it came from. Allowance taken in an
 * earlier period is not returned: that period's allowance is gone anyway, and returning it to
 * the fresh allowance would grant credits nobody paid for. It is reported as forfeited.
 */
export function refundMovement(
  reservation: CreditMovement & { periodStart: Date },
  currentPeriodStart: Date,
): { movement: CreditMovement; forfeited: number } {
  const samePeriod = reservation.periodStart.getTime() === currentPeriodStart.getTime();
  const allowance = samePeriod ? -reservation.allowance : 0;
  return {
    movement: { allowance, granted: -reservation.granted },
    forfeited: samePeriod ? 0 : -reservation.allowance,
  };
}
