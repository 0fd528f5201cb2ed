/**
 * Time-bucketed expiry. FerretDB pushes only equality filters down to its indexes (ranges such as
 * `createdAt < cutoff` are evaluated after reading every document), so a sweeper that asked "what
 * is older than the cutoff" would read the whole collection on every pass. Instead each expiring
 * document carries the UTC hour in which it expires, and a sweeper asks for one hour at a time,
 * an indexed equality on both MongoDB and FerretDB (docs/decisions.md#expiry-by-hour-buckets).
 */

const HOUR_MS = 60 * 60 * 1000;

/** The bucket of an instant: its UTC hour as `YYYY-MM-DDTHH`. */
export function hourBucketOf(instant: Date | number): string {
  const ms = typeof instant === 'number' ? instant : instant.getTime();
  return new Date(Math.floor(ms / HOUR_MS) * HOUR_MS).toISOString().slice(0, 13);
}

/** The bucket in which something that starts at `start` and lives `lifetimeMs` expires. */
export function expiryHourOf(start: Date, lifetimeMs: number): string {
  return hourBucketOf(start.getTime() + lifetimeMs);
}

/**
 * Which buckets a sweeper visits, remembering (in memory) the oldest one that may still hold
 * documents to expire, so a pass reads the current hours and not the whole history. A new
 * process looks back `lookbackMs`, which covers everything that expired while no sweeper ran
 * for that long, a few hours a pass (`maxBucketsPerPass`): a pass is one query per bucket, and
 * where a filter on the bucket is not served from an index (FerretDB's SQLite backend, the local
 * cluster's) the 169 hours of a week's look-back in one pass took minutes of a connection the
 * process's requests wait on, at every restart.
 */
export class ExpiryWalk {
  /** Start of the oldest bucket not known to be finished. */
  private oldestOpen: number | undefined;

  constructor(
    private readonly lookbackMs: number,
    private readonly maxBucketsPerPass = Number.POSITIVE_INFINITY,
  ) {}

  /**
   * Buckets due as of `now`, oldest first: every hour from the oldest open one to now's, at
   * most `maxBucketsPerPass` of them (the later ones come in the next passes).
   */
  due(now: Date): string[] {
    const current = Math.floor(now.getTime() / HOUR_MS) * HOUR_MS;
    const from = this.oldestOpen ?? current - Math.ceil(this.lookbackMs / HOUR_MS) * HOUR_MS;
    const buckets: string[] = [];
    for (
      let start = from;
      start <= current && buckets.length < this.maxBucketsPerPass;
      start += HOUR_MS
    ) {
      buckets.push(hourBucketOf(start));
    }
    return buckets;
  }

  /**
   * Records that the buckets before `firstUnfinished` hold nothing left to expire. Only buckets
   * of hours that ended over an hour before `now` are ever closed: nothing new can land there
   * (a document's bucket lies after its own creation), whatever the clocks of other replicas say.
   */
  finishedBefore(firstUnfinished: string, now: Date): void {
    const closable = Math.floor(now.getTime() / HOUR_MS) * HOUR_MS - HOUR_MS;
    const start = Math.min(Date.parse(`${firstUnfinished}:00:00Z`), closable);
    this.oldestOpen = Math.max(this.oldestOpen ?? start, start);
  }
}
