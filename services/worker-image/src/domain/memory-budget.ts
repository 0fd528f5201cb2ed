/**
 * The image memory one worker process shares between its jobs (queued and inline). A job
 * reserves its estimate before it decodes anything and returns it when done, so small images
 * run side by side while a large one waits until there is room, and together they never
 * exceed the total the pod was sized for.
 *
 * Reservations are served first come, first served: a large job at the head of the line is
 * not overtaken by a stream of small ones (which would starve it for as long as traffic lasts).
 * A waiter can give up through an AbortSignal and leaves the line at once; that is why this is
 * not async-mutex's weighted Semaphore, whose waiters cannot be cancelled one by one.
 */
export class MemoryBudget {
  readonly totalBytes: number;
  #reservedBytes = 0;
  readonly #waiting: Array<{ bytes: number; grant: () => void }> = [];

  constructor(totalBytes: number) {
    if (!Number.isSafeInteger(totalBytes) || totalBytes <= 0) {
      throw new RangeError(`a memory budget must be a positive integer, got ${totalBytes}`);
    }
    this.totalBytes = totalBytes;
  }

  get reservedBytes(): number {
    return this.#reservedBytes;
  }

  get waitingCount(): number {
    return this.#waiting.length;
  }

  /**
   * Resolves with a release function once `bytes` are free. Rejects with the signal's reason
   * if it aborts first (an inline request that timed out, a worker shutting down); nothing is
   * then held. Asking for more than the whole budget is a programming error: such jobs are
   * refused before they get here.
   */
  reserve(bytes: number, signal?: AbortSignal): Promise<() => void> {
    if (!Number.isSafeInteger(bytes) || bytes <= 0 || bytes > this.totalBytes) {
      return Promise.reject(
        new RangeError(`cannot reserve ${bytes} bytes of a ${this.totalBytes}-byte budget`),
      );
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#waiting.length === 0 && this.#reservedBytes + bytes <= this.totalBytes) {
      this.#reservedBytes += bytes;
      return Promise.resolve(this.#releaser(bytes));
    }
    return new Promise((resolve, reject) => {
      const entry = {
        bytes,
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(this.#releaser(bytes));
        },
      };
      const onAbort = () => {
        const index = this.#waiting.indexOf(entry);
        if (index !== -1) this.#waiting.splice(index, 1);
        reject(signal?.reason);
        // The head may have been what blocked smaller reservations behind it.
        this.#grantWaiting();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(entry);
    });
  }

  #releaser(bytes: number): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#reservedBytes -= bytes;
      this.#grantWaiting();
    };
  }

  #grantWaiting(): void {
    for (let head = this.#waiting[0]; head; head = this.#waiting[0]) {
      if (this.#reservedBytes + head.bytes > this.totalBytes) return;
      this.#waiting.shift();
      this.#reservedBytes += head.bytes;
      head.grant();
    }
  }
}
