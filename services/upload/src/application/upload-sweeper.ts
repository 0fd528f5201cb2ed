import type { Logger } from '@tamp/kit';
import { STORAGE_LIFECYCLE_RULES, storageKeys } from '@tamp/proto';
import type { UploadRepository } from '../adapters/upload-repository';
import type { UploadStorage } from '../adapters/upload-storage';
import { type Clock, checkedKeyOf } from './uploads';

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Uploads are kept as long as the bucket's lifecycle rule keeps their objects (2 days), a day
 * past their 24-hour lifetime, so a late job still gets UPLOAD_EXPIRED rather than
 * UPLOAD_NOT_FOUND for a while. Derived from the rule so the two cannot drift apart.
 */
export const UPLOAD_RETENTION_MS =
  (STORAGE_LIFECYCLE_RULES.find((rule) => storageKeys.upload('a', 'u').startsWith(rule.prefix))
    ?.days ?? 2) * DAY_MS;

const BATCH_SIZE = 200;

/**
 * Deletes uploads older than the retention and their objects. MongoDB has no TTL index here
 * (FerretDB rejects them), and the bucket's lifecycle rule is only the backstop for objects.
 * Safe with several replicas: deleting what another replica already deleted is a no-op.
 */
export class UploadSweeper {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<number> | undefined;

  constructor(
    private readonly repository: UploadRepository,
    private readonly storage: UploadStorage,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Sweeps every `intervalMs` until stopped. */
  start(intervalMs: number): void {
    this.timer = setInterval(() => {
      this.sweep().catch((error: unknown) =>
        this.logger.error({ err: error }, 'upload sweep failed'),
      );
    }, intervalMs);
    this.timer.unref();
  }

  /** Stops the timer and waits for a pass under way. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping?.catch(() => undefined);
  }

  /**
   * One pass; returns how many uploads were removed. One pass at a time: a caller arriving
   * during a pass shares its result.
   */
  sweep(): Promise<number> {
    this.sweeping ??= this.sweepOnce().finally(() => {
      this.sweeping = undefined;
    });
    return this.sweeping;
  }

  private async sweepOnce(): Promise<number> {
    const cutoff = new Date(this.clock().getTime() - UPLOAD_RETENTION_MS);
    let removed = 0;
    for (;;) {
      const batch = await this.repository.findCreatedBefore(cutoff, BATCH_SIZE);
      for (const upload of batch) {
        // Object first: if deleting the document then fails, the next pass finds it again.
        await this.storage.remove(upload.key);
        await this.storage.remove(checkedKeyOf(upload));
        await this.repository.delete(upload._id);
        removed++;
      }
      if (batch.length < BATCH_SIZE) break;
    }
    if (removed > 0) this.logger.info({ removed, cutoff }, 'swept expired uploads');
    return removed;
  }
}
