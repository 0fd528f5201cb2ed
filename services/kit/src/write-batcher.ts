/**
 * Gathers items for one bulk write: the first item starts a write at once (with whatever joins
 * in the same turn of the event loop), and the items that arrive while a write is in flight go
 * together in the next one. A quiet service writes each item alone, with no delay; a busy one
 * writes fewer, larger batches. Each `add` settles with the write that carried its item.
 *
 * Not DataLoader: it batches the calls of one tick (or of a fixed window, which would add that
 * window to every caller's wait), not what queued behind a write still in flight.
 */
export class WriteBatcher<Item> {
  private queued: { item: Item; resolve(): void; reject(error: unknown): void }[] = [];
  private writing = false;

  constructor(
    private readonly write: (items: Item[]) => Promise<void>,
    private readonly maxBatch = 500,
  ) {}

  add(item: Item): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queued.push({ item, resolve, reject });
      if (this.writing) return;
      this.writing = true;
      setImmediate(() => void this.drain());
    });
  }

  private async drain(): Promise<void> {
    while (this.queued.length > 0) {
      const batch = this.queued.splice(0, this.maxBatch);
      try {
        await this.write(batch.map((queued) => queued.item));
        for (const queued of batch) queued.resolve();
      } catch (error) {
        for (const queued of batch) queued.reject(error);
      }
    }
    this.writing = false;
  }
}
