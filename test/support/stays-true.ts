import { setTimeout as sleep } from 'node:timers/promises';

export interface StaysTrueOptions {
  /**
   * How long the check must keep holding: long enough that the thing which must not happen
   * (a second delivery, a retry, a duplicate charge) would have shown by then if it were coming.
   */
  forMs: number;
  /** Time between checks; 20 ms unless told. */
  intervalMs?: number;
  /** Named in the failure message. */
  what?: string;
}

/**
 * The one settle window of the test suites (docs/testing.md). Tests wait on observable state
 * (`vi.waitFor`, `expect.poll`, an event or promise the code exposes), never on a fixed sleep;
 * the exception is proving that something does NOT happen, which no state can announce. Such a
 * test waits first for everything that must happen, then calls this, naming in a comment why
 * `forMs` is long enough.
 *
 * `check` fails by returning `false` or by throwing (an `expect`); it may be async. It runs at
 * once, then every `intervalMs`, and a last time once `forMs` has passed, so a change anywhere
 * in the window fails the test, not only one still visible at its end.
 */
export async function assertStaysTrue(
  check: () => unknown,
  { forMs, intervalMs = 20, what = 'the check' }: StaysTrueOptions,
): Promise<void> {
  const started = performance.now();
  for (;;) {
    const last = performance.now() - started >= forMs;
    let failure: unknown;
    try {
      if ((await check()) === false) failure = new Error('it returned false');
    } catch (error) {
      failure = error;
    }
    if (failure !== undefined) {
      const elapsed = Math.round(performance.now() - started);
      const reason = failure instanceof Error ? failure.message : String(failure);
      throw new Error(`${what} stopped holding after ${elapsed} ms of ${forMs} ms: ${reason}`, {
        cause: failure,
      });
    }
    if (last) return;
    await sleep(Math.max(0, Math.min(intervalMs, forMs - (performance.now() - started))));
  }
}
