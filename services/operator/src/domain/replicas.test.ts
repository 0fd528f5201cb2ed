import { describe, expect, it } from 'vitest';
import { recommendReplicas, stabilize, stabilizedUntil } from './replicas';

const spec = { minReplicas: 1, maxReplicas: 5, targetBacklogPerReplica: 10 };
const at = (seconds: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, seconds));

describe('recommendReplicas', () => {
  it('is ceil(backlog / target) within min and max', () => {
    expect(recommendReplicas(0, spec)).toBe(1);
    expect(recommendReplicas(1, spec)).toBe(1);
    expect(recommendReplicas(11, spec)).toBe(2);
    expect(recommendReplicas(30, spec)).toBe(3);
    expect(recommendReplicas(1_000, spec)).toBe(5);
  });

  it('lets an idle pool with minReplicas 0 go to zero, and one job bring it back', () => {
    const zero = { ...spec, minReplicas: 0 };
    expect(recommendReplicas(0, zero)).toBe(0);
    expect(recommendReplicas(1, zero)).toBe(1);
  });
});

describe('stabilize', () => {
  it('scales up at once', () => {
    const first = stabilize([], 2, at(0), 60);
    expect(first.replicas).toBe(2);
    expect(stabilize(first.history, 4, at(1), 60).replicas).toBe(4);
  });

  it('scales down only to the highest recommendation of the window', () => {
    let state = stabilize([], 5, at(0), 60);
    state = stabilize(state.history, 3, at(20), 60);
    expect(state.replicas).toBe(5);
    state = stabilize(state.history, 1, at(40), 60);
    expect(state.replicas).toBe(5);
    // 5 was recommended until 3 was seen (20 s): it leaves the window at 80 s.
    state = stabilize(state.history, 1, at(79), 60);
    expect(state.replicas).toBe(5);
    state = stabilize(state.history, 1, at(81), 60);
    expect(state.replicas).toBe(3);
    state = stabilize(state.history, 1, at(101), 60);
    expect(state.replicas).toBe(1);
  });

  it('keeps only recommendations that can still be the maximum', () => {
    let state = stabilize([], 5, at(0), 600);
    for (let second = 1; second <= 100; second++) {
      state = stabilize(state.history, 1 + (second % 3), at(second), 600);
    }
    // A decreasing list: 5, then the last 3, the last 2... bounded by the replica range.
    expect(state.history.map((entry) => entry.replicas)).toEqual([5, 3, 2]);
    expect(state.replicas).toBe(5);
  });

  it('follows the recommendation at once with a window of 0', () => {
    const state = stabilize(stabilize([], 5, at(0), 0).history, 1, at(0), 0);
    expect(state.replicas).toBe(1);
  });

  it('says until when a higher count is held', () => {
    const state = stabilize(stabilize([], 4, at(0), 30).history, 1, at(10), 30);
    expect(stabilizedUntil(state.history, 4, 30)).toEqual(at(40));
  });

  it('changes nothing while the recommendation stays the same', () => {
    const first = stabilize([], 3, at(0), 60);
    const later = stabilize(first.history, 3, at(500), 60);
    expect(later.history).toEqual(first.history);
    expect(later.replicas).toBe(3);
  });
});
