import { describe, expect, it } from 'vitest';
import { refundMovement, reservationMovement } from './credit-movement';

describe('reservationMovement', () => {
  it('takes the allowance first, then granted credits', () => {
    expect(reservationMovement({ allowanceRemaining: 3, grantedRemaining: 10 }, 2)).toEqual({
      allowance: -2,
      granted: 0,
    });
    expect(reservationMovement({ allowanceRemaining: 3, grantedRemaining: 10 }, 5)).toEqual({
      allowance: -3,
      granted: -2,
    });
    expect(reservationMovement({ allowanceRemaining: 0, grantedRemaining: 10 }, 10)).toEqual({
      allowance: 0,
      granted: -10,
    });
  });

  it('takes nothing when both buckets together are short', () => {
    expect(reservationMovement({ allowanceRemaining: 3, grantedRemaining: 1 }, 5)).toBeNull();
  });
});

describe('refundMovement', () => {
  const periodStart = new Date('2025-01-01T00:00:00Z');

  it('returns each bucket what the reservation took from it', () => {
    expect(refundMovement({ allowance: -3, granted: -2, periodStart }, periodStart)).toEqual({
      movement: { allowance: 3, granted: 2 },
      forfeited: 0,
    });
  });

  it('forfeits allowance taken in an earlier period, but returns granted credits', () => {
    const next = new Date('2025-02-01T00:00:00Z');
    expect(refundMovement({ allowance: -3, granted: -2, periodStart }, next)).toEqual({
      movement: { allowance: 0, granted: 2 },
      forfeited: 3,
    });
  });
});
