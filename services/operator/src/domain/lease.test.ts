import { describe, expect, it } from 'vitest';
import { claim, heldByAnother, observe, release } from './lease';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const ms = (seconds: number) => t0.getTime() + seconds * 1000;

describe('Lease semantics', () => {
  it('counts another holder valid for the lease duration from when it was seen to change', () => {
    const record = claim(undefined, 'a', 15, t0);
    const seen = observe(undefined, record, ms(100)); // our clock: far from the writer's
    expect(heldByAnother(seen, 'b', ms(114))).toBe(true);
    expect(heldByAnother(seen, 'b', ms(116))).toBe(false);
    // An unchanged record keeps its first sighting; a renewed one is seen afresh.
    expect(observe(seen, { ...record }, ms(110))).toBe(seen);
    const renewed = observe(seen, claim(record, 'a', 15, new Date(ms(5))), ms(110));
    expect(heldByAnother(renewed, 'b', ms(116))).toBe(true);
  });

  it('never counts our own or a released lease as held by another', () => {
    const record = claim(undefined, 'a', 15, t0);
    expect(heldByAnother(observe(undefined, record, ms(0)), 'a', ms(1))).toBe(false);
    const released = release(record, new Date(ms(1)));
    expect(released.holderIdentity).toBe('');
    expect(heldByAnother(observe(undefined, released, ms(1)), 'b', ms(1))).toBe(false);
  });

  it('keeps acquireTime on renewal and counts transitions on takeover', () => {
    const first = claim(undefined, 'a', 15, t0);
    expect(first.leaseTransitions).toBe(0);
    const renewed = claim(first, 'a', 15, new Date(ms(2)));
    expect(renewed.acquireTime).toBe(first.acquireTime);
    expect(renewed.leaseTransitions).toBe(0);
    const taken = claim(release(renewed, new Date(ms(3))), 'b', 15, new Date(ms(4)));
    expect(taken).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    expect(taken.acquireTime).toBe(new Date(ms(4)).toISOString());
  });
});
