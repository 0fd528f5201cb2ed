import { describe, expect, it } from 'vitest';
import { MemoryBudget } from './memory-budget';

/** Settles pending promise callbacks so "not yet granted" can be observed. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

function track(promise: Promise<() => void>) {
  const state: { release?: () => void; error?: unknown } = {};
  promise.then(
    (release) => {
      state.release = release;
    },
    (error) => {
      state.error = error;
    },
  );
  return state;
}

describe('MemoryBudget', () => {
  it('grants reservations side by side while they fit, and the rest as memory returns', async () => {
    const budget = new MemoryBudget(100);
    const first = track(budget.reserve(60));
    const second = track(budget.reserve(40));
    const third = track(budget.reserve(30));
    await settle();
    expect(first.release && second.release).toBeTruthy();
    expect(third.release).toBeUndefined();
    expect(budget.reservedBytes).toBe(100);
    expect(budget.waitingCount).toBe(1);

    second.release?.();
    await settle();
    expect(third.release).toBeDefined();
    expect(budget.reservedBytes).toBe(90);
  });

  it('serves the line in order: a large reservation is not overtaken by small ones', async () => {
    const budget = new MemoryBudget(100);
    const running = track(budget.reserve(50));
    const large = track(budget.reserve(100));
    const small = track(budget.reserve(10));
    await settle();
    expect(large.release).toBeUndefined();
    expect(small.release).toBeUndefined();

    running.release?.();
    await settle();
    expect(large.release).toBeDefined();
    expect(small.release).toBeUndefined();
    large.release?.();
    await settle();
    expect(small.release).toBeDefined();
  });

  it('releases once however often release is called', async () => {
    const budget = new MemoryBudget(100);
    const release = await budget.reserve(70);
    release();
    release();
    expect(budget.reservedBytes).toBe(0);
    await budget.reserve(100);
    expect(budget.reservedBytes).toBe(100);
  });

  it('lets an aborted waiter leave the line, holding nothing, and unblocks those behind it', async () => {
    const budget = new MemoryBudget(100);
    const running = track(budget.reserve(80));
    const controller = new AbortController();
    const large = track(budget.reserve(90, controller.signal));
    const small = track(budget.reserve(20));
    await settle();
    expect(small.release).toBeUndefined();

    const reason = new Error('inline processing timed out');
    controller.abort(reason);
    await settle();
    expect(large.error).toBe(reason);
    expect(small.release).toBeDefined();
    expect(budget.waitingCount).toBe(0);
    expect(budget.reservedBytes).toBe(100);
    running.release?.();
    expect(budget.reservedBytes).toBe(20);
  });

  it('refuses an already aborted signal and sizes it cannot ever grant', async () => {
    const budget = new MemoryBudget(100);
    const controller = new AbortController();
    controller.abort(new Error('shutting down'));
    await expect(budget.reserve(10, controller.signal)).rejects.toThrow('shutting down');
    await expect(budget.reserve(101)).rejects.toThrow(RangeError);
    await expect(budget.reserve(0)).rejects.toThrow(RangeError);
    expect(budget.reservedBytes).toBe(0);
    expect(() => new MemoryBudget(0)).toThrow(RangeError);
  });
});
