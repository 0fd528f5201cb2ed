import type { Logger } from '@tamp/kit';
import type { ApiKeyRepository } from '../adapters/api-key-repository';
import { keyUseMinute } from '../domain/api-key';

/** Past this many keys, minutes already over are forgotten (they would be written again anyway). */
const REMEMBERED_KEYS = 10_000;

/**
 * Keeps each API key's `lastUsedAt` to the minute, off the authentication path: at most one
 * write per key and minute (remembered here, per process), never awaited, and a failed write
 * costs a logged warning, not a refused request.
 */
export class KeyUseRecorder {
  /** keyId → the minute last written (or being written) for it. */
  private readonly writtenMinutes = new Map<string, number>();
  private readonly writes = new Set<Promise<void>>();

  constructor(
    private readonly keys: ApiKeyRepository,
    private readonly now: () => Date,
    private readonly logger: Logger,
  ) {}

  record(keyId: string): void {
    const minute = keyUseMinute(this.now());
    if ((this.writtenMinutes.get(keyId) ?? Number.NEGATIVE_INFINITY) >= minute) return;
    this.forgetMinutesBefore(minute);
    this.writtenMinutes.set(keyId, minute);
    const write = this.keys
      .recordUse(keyId, new Date(minute))
      .catch((error: unknown) => {
        // The next request of this key tries again.
        if (this.writtenMinutes.get(keyId) === minute) this.writtenMinutes.delete(keyId);
        this.logger.warn({ err: error, keyId }, 'could not record the last use of an API key');
      })
      .finally(() => this.writes.delete(write));
    this.writes.add(write);
  }

  /** Waits for the writes under way, so a stopping service does not cut them off. */
  async settle(): Promise<void> {
    await Promise.all(this.writes);
  }

  private forgetMinutesBefore(minute: number): void {
    if (this.writtenMinutes.size < REMEMBERED_KEYS) return;
    for (const [keyId, written] of this.writtenMinutes) {
      if (written < minute) this.writtenMinutes.delete(keyId);
    }
  }
}
