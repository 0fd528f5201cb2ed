import { exponentialDelayMs, jitteredDelayMs, type RandomSource } from '@tamp/proto';

const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 60_000;

/**
 * Keys of objects to reconcile, with the guarantees controllers rely on (client-go's
 * workqueue): a key waits in the queue at most once however often it is added, is never handed
 * to two workers at once, and a key added while it is being worked on is handed out again when
 * that work is done, so no change is ever lost or reconciled twice in parallel.
 */
export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private readonly waiting: Array<(key: string | undefined) => void> = [];
  private closed = false;

  /** `random`: the jitter source of the backoff (proto's backoff.ts). */
  constructor(private readonly random: RandomSource = Math.random) {}

  add(key: string): void {
    if (this.closed || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    const waiter = this.waiting.shift();
    if (waiter !== undefined) {
      this.dirty.delete(key);
      this.processing.add(key);
      waiter(key);
    } else {
      this.queue.push(key);
    }
  }

  /** Adds the key after `delayMs`, keeping the earliest of several pending delays. */
  addAfter(key: string, delayMs: number): void {
    if (this.closed) return;
    const at = Date.now() + delayMs;
    const pending = this.delayed.get(key);
    if (pending !== undefined && pending.at <= at) return;
    if (pending !== undefined) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    this.delayed.set(key, { at, timer });
  }

  /**
   * Retries a failed key with exponential backoff (250 ms doubling up to a minute), with equal
   * jitter, so the keys that failed together (an API server outage) are not retried together.
   */
  addRateLimited(key: string): void {
    const failures = this.failures.get(key) ?? 0;
    this.failures.set(key, failures + 1);
    const nominal = exponentialDelayMs(BACKOFF_BASE_MS, failures, BACKOFF_MAX_MS);
    this.addAfter(key, jitteredDelayMs(nominal, this.random));
  }

  /** The key succeeded: its next failure starts the backoff afresh. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  /** The next key to work on; undefined once the queue is shut down. */
  get(): Promise<string | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    const key = this.queue.shift();
    if (key !== undefined) {
      this.dirty.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
  }

  shutDown(): void {
    this.closed = true;
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    for (const waiter of this.waiting.splice(0)) waiter(undefined);
  }
}
