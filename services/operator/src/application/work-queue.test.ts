import { describe, expect, it } from 'vitest';
import { WorkQueue } from './work-queue';

describe('WorkQueue', () => {
  it('holds a key once however often it is added', async () => {
    const queue = new WorkQueue();
    queue.add('a');
    queue.add('a');
    queue.add('b');
    expect(await queue.get()).toBe('a');
    expect(await queue.get()).toBe('b');
    queue.shutDown();
    expect(await queue.get()).toBeUndefined();
  });

  it('never hands a key out twice at once, and keeps an add made meanwhile', async () => {
    const queue = new WorkQueue();
    queue.add('a');
    const key = await queue.get();
    queue.add('a'); // changed while being reconciled
    let second: string | undefined;
    void queue.get().then((next) => {
      second = next;
    });
    await Promise.resolve();
    expect(second).toBeUndefined();
    queue.done(key!);
    await Promise.resolve();
    expect(second).toBe('a');
    queue.shutDown();
  });

  it('retries a failed key after a backoff jittered from its random source', async () => {
    let draws = 0;
    const queue = new WorkQueue(() => {
      draws += 1;
      return 0; // the bottom of the band: half of the first 250 ms
    });
    queue.addRateLimited('a');
    expect(draws).toBe(1);
    expect(await queue.get()).toBe('a');
    queue.shutDown();
  });

  it('keeps the earliest of several delayed adds', async () => {
    const queue = new WorkQueue();
    queue.addAfter('a', 60_000);
    queue.addAfter('a', 1);
    expect(await queue.get()).toBe('a');
    queue.shutDown();
  });
});
