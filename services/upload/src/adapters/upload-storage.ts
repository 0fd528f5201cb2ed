import type { Logger, ObjectStore } from '@tamp/kit';
import { LIMITS, ServiceError } from '@tamp/proto';
import type { StoredObjectFacts } from '../domain/consumption';

/**
 * The upload service's use of the bucket. A storage failure becomes UNAVAILABLE (503 with
 * Retry-After at the gateway) instead of an opaque INTERNAL: the client should simply retry.
 * The cause is logged here, as it does not travel with the answer.
 */
export class UploadStorage {
  constructor(
    private readonly store: ObjectStore,
    private readonly logger: Logger,
  ) {}

  /**
   * A PUT URL bound to the content type and to the declared size (storage refuses a body of
   * any other length, so the plan limit checked on the declaration holds), valid for the
   * spec's 15 minutes.
   */
  presignPut(key: string, content: { type: string; length: number }): Promise<string> {
    return this.store.presignUpload(key, content, LIMITS.uploadUrlTtlSeconds);
  }

  /**
   * Copies the client's object to `checkedKey` and returns the size, content type and first
   * `headBytes` bytes of that copy; undefined when the client has not PUT it yet. The checks run
   * on the copy and jobs read only the copy, so bytes PUT again with the still-valid upload URL
   * after the checks can never reach a worker.
   */
  async takeCheckedCopy(
    key: string,
    checkedKey: string,
    headBytes: number,
  ): Promise<StoredObjectFacts | undefined> {
    try {
      if ((await this.store.copy(key, checkedKey)) === undefined) return undefined;
      const stat = await this.store.stat(checkedKey);
      if (stat === undefined) return undefined;
      // A range read of an empty object is refused by S3 (416), so read only what exists.
      const length = Math.min(headBytes, stat.size);
      const head = length === 0 ? new Uint8Array(0) : await this.store.readHead(checkedKey, length);
      return { size: stat.size, contentType: stat.contentType, head };
    } catch (error) {
      if (hasCode(error, 'NoSuchKey') || hasCode(error, 'NotFound')) return undefined;
      throw this.unavailable(error);
    }
  }

  /** Removes the object; removing an object that is already gone succeeds. */
  async remove(key: string): Promise<void> {
    try {
      await this.store.remove(key);
    } catch (error) {
      throw this.unavailable(error);
    }
  }

  private unavailable(cause: unknown): ServiceError {
    this.logger.warn({ err: cause }, 'storage unavailable');
    const error = new ServiceError('UNAVAILABLE', 'Storage is unavailable; retry shortly');
    error.cause = cause;
    return error;
  }
}

function hasCode(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}
