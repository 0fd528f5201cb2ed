/**
 * The linger of write-behind confirmations (a job's outbox flags and closed admission): far below the 30 s after which a reconciler would redo what their loss
 * leaves, long enough that a busy service writes one command a window instead of one per job.
 */
export const WRITE_BEHIND_LINGER_MS = 500;

export interface WriteBatcherOptions {
  /** Items per write at most. */
  maxBatch?: number;
  /**
   * How long the first item of a batch waits for others before the write starts. 0 (the
   * default): at once, so a quiet service writes each item alone with no delay. Above 0 for
   * write-behind confirmations that nobody waits on (outbox flags, closed admissions), whose
   * loss only means a redo by a reconciler: a busy service then writes one command per window
   * instead of one per job.
   */
  lingerMs?: number;
}

/** What a write reports: nothing (each item settles as the whole write did), or one outcome per item. */
// biome-ignore lint/suspicious/noConfusingVoidType: a write of a whole batch returns nothing at all
type WriteOutcomes<Outcome> = void | readonly PromiseSettledResult<Outcome>[];

/**
 * Gathers items for one bulk write: the first item starts a write (at once, or after
 * `lingerMs`) with whatever joined meanwhile, and the items that arrive while a write is in
 * flight go together in the next one. Each `add` settles with the write that carried its item:
 * with that item's own outcome when the write reports one per item (a bulk insert's inserted,
 * taken or failed), else as the whole write did.
 *
 * Not DataLoader: it batches the calls of one tick, not what queues behind a write still in
 * flight, and has no way to flush a window on shutdown.
 */
export class WriteBatcher<Item, Outcome = void> {
  private queued: { item: Item; resolve(outcome: Outcome): void; reject(error: unknown): void }[] =
    [];
  private draining: Promise<void> | undefined;
  /** Cancels the wait before the next write, while one is scheduled. */
  private cancelWait: (() => void) | undefined;
  private readonly maxBatch: number;
  private readonly lingerMs: number;

  /**
   * `write` resolves with nothing (every item settles as the write did) or with one outcome per
   * item, in the items' order.
   */
  constructor(
    private readonly write: (items: Item[]) => Promise<WriteOutcomes<Outcome>>,
    options: WriteBatcherOptions = {},
  ) {
    this.maxBatch = options.maxBatch ?? 500;
    this.lingerMs = options.lingerMs ?? 0;
  }

  add(item: Item): Promise<Outcome> {
    return new Promise<Outcome>((resolve, reject) => {
      this.queued.push({ item, resolve, reject });
      this.schedule();
    });
  }

  /** Writes what is queued now and resolves once every write under way has ended (on stop). */
  async flush(): Promise<void> {
    if (this.cancelWait !== undefined) this.startDrain();
    await this.draining;
  }

  private schedule(): void {
    if (this.draining !== undefined || this.cancelWait !== undefined) return;
    if (this.lingerMs > 0) {
      const timer = setTimeout(() => this.startDrain(), this.lingerMs);
      this.cancelWait = () => clearTimeout(timer);
    } else {
      // Whatever else is added in this turn of the event loop joins the first write.
      const immediate = setImmediate(() => this.startDrain());
      this.cancelWait = () => clearImmediate(immediate);
    }
  }

  private startDrain(): void {
    this.cancelWait?.();
    this.cancelWait = undefined;
    if (this.draining !== undefined) return;
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
      // Added after the last batch was taken, while its callers' continuations ran.
      if (this.queued.length > 0) this.schedule();
    });
  }

  private async drain(): Promise<void> {
    while (this.queued.length > 0) {
      const batch = this.queued.splice(0, this.maxBatch);
      let outcomes: WriteOutcomes<Outcome>;
      try {
        outcomes = await this.write(batch.map((queued) => queued.item));
        if (outcomes !== undefined && outcomes.length !== batch.length) {
          throw new Error(`a write of ${batch.length} items reported ${outcomes.length} outcomes`);
        }
      } catch (error) {
        for (const queued of batch) queued.reject(error);
        continue;
      }
      batch.forEach((queued, index) => {
        const outcome = outcomes?.[index];
        if (outcome === undefined) queued.resolve(undefined as Outcome);
        else if (outcome.status === 'fulfilled') queued.resolve(outcome.value);
        else queued.reject(outcome.reason);
      });
    }
  }
}
