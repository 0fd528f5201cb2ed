import { describe, expect, it } from 'vitest';
import { assertStaysTrue } from './stays-true';

describe('assertStaysTrue', () => {
  it('resolves once the check held for the whole window, having checked it at its end too', async () => {
    let checks = 0;
    const started = performance.now();
    await assertStaysTrue(
      () => {
        checks += 1;
      },
      { forMs: 100, intervalMs: 20 },
    );
    expect(performance.now() - started).toBeGreaterThanOrEqual(100);
    expect(checks).toBeGreaterThanOrEqual(3);
  });

  it('fails when the check returns false in the middle of the window', async () => {
    let state = true;
    setTimeout(() => {
      state = false;
    }, 50);
    await expect(
      assertStaysTrue(() => state, { forMs: 1_000, intervalMs: 10, what: 'the state' }),
    ).rejects.toThrow(/^the state stopped holding after \d+ ms of 1000 ms: it returned false$/);
  });

  it('fails with the message of a failed expectation, async ones too', async () => {
    const seen: number[] = [];
    setTimeout(() => seen.push(1), 30);
    await expect(
      assertStaysTrue(async () => expect(seen).toHaveLength(0), { forMs: 1_000 }),
    ).rejects.toThrow(/stopped holding after \d+ ms of 1000 ms: .*length/);
  });

  it('fails on a change that is over before the window ends', async () => {
    let state = true;
    setTimeout(() => {
      state = false;
      setTimeout(() => {
        state = true;
      }, 60);
    }, 30);
    await expect(assertStaysTrue(() => state, { forMs: 300, intervalMs: 10 })).rejects.toThrow(
      /stopped holding/,
    );
  });

  it('fails at once when the check does not hold to begin with', async () => {
    const started = performance.now();
    await expect(assertStaysTrue(() => false, { forMs: 5_000 })).rejects.toThrow(
      /after \d+ ms of 5000 ms/,
    );
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});
