import { describe, expect, it } from 'vitest';
import { WriteBatcher } from './write-batcher';

/** A write that finishes only when the test says so. */
function controlledWrites() {
  const batches: number[][] = [];
  const finish: (() => void)[] = [];
  const write = (items: number[]) =>
    new Promise<void>((resolve) => {
      batches.push(items);
      finish.push(resolve);
    });
  return { batches, finish, write };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('WriteBatcher', () => {
  it('writes the first item at once and what queued behind it in one next write', async () => {
    const { batches, finish, write } = controlledWrites();
    const batcher = new WriteBatcher(write);
    const first = batcher.add(1);
    await turn();
    expect(batches).toEqual([[1]]);
    const behind = [batcher.add(2), batcher.add(3), batcher.add(4)];
    await turn();
    expect(batches).toEqual([[1]]);
    finish[0]!();
    await first;
    await turn();
    expect(batches).toEqual([[1], [2, 3, 4]]);
    finish[1]!();
    await Promise.all(behind);
  });

  it('splits at maxBatch and rejects the items of a write that failed, and only those', async () => {
    let calls = 0;
    const written: number[][] = [];
    const batcher = new WriteBatcher<number>(
      async (items) => {
        calls++;
        if (calls === 1) throw new Error('unavailable');
        written.push(items);
      },
      { maxBatch: 2 },
    );
    const outcomes = await Promise.allSettled([1, 2, 3].map((item) => batcher.add(item)));
    expect(outcomes.map((outcome) => outcome.status)).toEqual([
      'rejected',
      'rejected',
      'fulfilled',
    ]);
    expect(written).toEqual([[3]]);
    // Idle again: the next item starts a write of its own.
    await batcher.add(4);
    expect(written).toEqual([[3], [4]]);
  });

  it('settles each item with its own outcome when the write reports one per item', async () => {
    const batcher = new WriteBatcher<number, string>(async (items) =>
      items.map(
        (item): PromiseSettledResult<string> =>
          item % 2 === 0
            ? { status: 'fulfilled', value: `even ${item}` }
            : { status: 'rejected', reason: new Error(`odd ${item}`) },
      ),
    );
    const outcomes = await Promise.allSettled([1, 2, 3, 4].map((item) => batcher.add(item)));
    expect(
      outcomes.map((outcome) =>
        outcome.status === 'fulfilled' ? outcome.value : (outcome.reason as Error).message,
      ),
    ).toEqual(['odd 1', 'even 2', 'odd 3', 'even 4']);
  });

  it('rejects every item of a write whose outcomes do not match its items', async () => {
    const batcher = new WriteBatcher<number, boolean>(async () => [
      { status: 'fulfilled', value: true },
    ]);
    const outcomes = await Promise.allSettled([batcher.add(1), batcher.add(2)]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected']);
  });

  it('with a linger, writes what arrived within the window together, and flush writes it now', async () => {
    const written: number[][] = [];
    const batcher = new WriteBatcher<number>(
      async (items) => {
        written.push(items);
      },
      { lingerMs: 60_000 },
    );
    const added = [batcher.add(1), batcher.add(2)];
    await turn();
    expect(written).toEqual([]);
    const third = batcher.add(3);
    await batcher.flush();
    await Promise.all([...added, third]);
    expect(written).toEqual([[1, 2, 3]]);
    // A new window starts with the next item.
    const fourth = batcher.add(4);
    await turn();
    expect(written).toEqual([[1, 2, 3]]);
    await batcher.flush();
    await fourth;
    expect(written).toEqual([[1, 2, 3], [4]]);
  });
});
