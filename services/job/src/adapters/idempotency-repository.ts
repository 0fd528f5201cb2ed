import { KeyedRepository } from '@tamp/kit';
import { LIMITS } from '@tamp/proto';
import type { Db } from 'mongodb';
import { expiryHourOf } from '../domain/expiry-hours';
import { IDEMPOTENCY_COLLECTION } from './job-repository';

/** A claimed `Idempotency-Key`: `_id` is `<accountId>:<key>`, so keys are scoped per account. */
export interface IdempotencyClaim {
  _id: string;
  jobId: string;
  /** SHA-256 of the endpoint and canonical body, computed by the gateway. */
  requestHash: string;
  createdAt: Date;
  /** The hour bucket in which the key expires (domain/expiry-hours.ts); absent on older claims. */
  expiryHour?: string;
}

export function claimIdOf(accountId: string, key: string): string {
  return `${accountId}:${key}`;
}

/**
 * The `idempotency` collection. A claim is an insertOne on `_id`: of concurrent twins exactly
 * one inserts; the others see a duplicate key and wait for (or take over) the claimed job.
 */
export class IdempotencyRepository extends KeyedRepository<IdempotencyClaim> {
  constructor(db: Db) {
    super(db, IDEMPOTENCY_COLLECTION);
  }

  /** True when this call made the claim; false when the key was claimed already. */
  async claim(claim: Omit<IdempotencyClaim, 'expiryHour'>): Promise<boolean> {
    return this.insertIfAbsent({
      ...claim,
      expiryHour: expiryHourOf(claim.createdAt, LIMITS.idempotencyKeyTtlMs),
    });
  }

  /** Frees a key whose job was never created, so the client can retry with it. */
  async release(claimId: string, jobId: string): Promise<void> {
    await this.collection.deleteOne({ _id: claimId, jobId });
  }

  /** Deletes the claims of one expiry hour made before `createdBefore`. */
  async deleteExpired(expiryHour: string, createdBefore: Date): Promise<number> {
    const outcome = await this.collection.deleteMany({
      expiryHour,
      createdAt: { $lt: createdBefore },
    });
    return outcome.deletedCount;
  }
}
