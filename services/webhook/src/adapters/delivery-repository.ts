import { type Db, type IndexSpecification, KeyedRepository } from '@tamp/kit';
import type { AttemptOutcome, DeliveryStatus } from '../domain/delivery-state';
import type { WebhookEventName } from '../domain/payload';
import { ATTEMPTS } from './attempt-repository';

export const DELIVERIES = 'webhook_deliveries';

export const WEBHOOK_INDEXES: readonly IndexSpecification[] = [
  { collection: DELIVERIES, name: 'due', keys: { status: 1, nextAttemptAt: 1 } },
  { collection: DELIVERIES, name: 'lease', keys: { status: 1, leaseUntil: 1 } },
  { collection: DELIVERIES, name: 'job', keys: { jobId: 1 } },
  { collection: ATTEMPTS, name: 'job', keys: { jobId: 1, attemptedAt: 1 } },
];

/** One delivery sequence per job event; `_id` = `<jobId>:<event>`. */
export interface DeliveryDocument {
  _id: string;
  jobId: string;
  accountId: string;
  event: WebhookEventName;
  target: string;
  /** Where the target came from: the job's own URL or the account default at scheduling time. */
  targetSource: 'job' | 'account';
  /** The exact body sent by every attempt (serialized once). */
  body: string;
  /** Standard Webhooks `webhook-id`, stable across retries and redeliveries. */
  webhookId: string;
  /** The trace of the event that scheduled it (W3C fields): every attempt's span joins it. */
  traceContext?: Record<string, string>;
  /** 1 for the first sequence, +1 for each operator redelivery. */
  sequence: number;
  /** Attempts finished in the current sequence. */
  attempts: number;
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
  /** While `delivering`: the claim expires then and another instance may take it over. */
  leaseUntil: Date | null;
  /** The current claim; a finishing attempt only updates the document if it still holds it. */
  claimId: string | null;
  lastOutcome: AttemptOutcome | null;
  lastError: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export type NewDelivery = Omit<
  DeliveryDocument,
  | 'sequence'
  | 'attempts'
  | 'status'
  | 'leaseUntil'
  | 'claimId'
  | 'lastOutcome'
  | 'lastError'
  | 'updatedAt'
>;

/**
 * The `webhook_deliveries` collection: one delivery sequence per job event. Every change is one
 * guarded single-document update (FerretDB has no transactions; kit serializes this process's
 * operations on one connection).
 */
export class DeliveryRepository extends KeyedRepository<DeliveryDocument> {
  constructor(db: Db) {
    super(db, DELIVERIES);
  }

  /** Inserts the sequence once; `false` when it already exists (a redelivered event). */
  schedule(delivery: NewDelivery): Promise<boolean> {
    return this.insertIfAbsent({
      ...delivery,
      sequence: 1,
      attempts: 0,
      status: 'scheduled',
      leaseUntil: null,
      claimId: null,
      lastOutcome: null,
      lastError: null,
      updatedAt: delivery.createdAt,
    });
  }

  /** Claims the most overdue sequence: `scheduled` and due → `delivering` with a lease. */
  async claimDue(now: Date, leaseUntil: Date, claimId: string): Promise<DeliveryDocument | null> {
    return this.collection.findOneAndUpdate(
      { status: 'scheduled', nextAttemptAt: { $lte: now } },
      { $set: { status: 'delivering', leaseUntil, claimId, updatedAt: now } },
      { sort: { nextAttemptAt: 1 }, returnDocument: 'after' },
    );
  }

  /**
   * Puts sequences whose claim expired (their instance died mid-attempt) back as due now. The
   * interrupted attempt may have reached the receiver; it is retried with the same number.
   */
  async recoverExpiredLeases(now: Date): Promise<number> {
    const result = await this.collection.updateMany(
      { status: 'delivering', leaseUntil: { $lte: now } },
      { $set: { status: 'scheduled', nextAttemptAt: now, leaseUntil: null, claimId: null } },
    );
    return result.modifiedCount;
  }

  /** Gives a claim back without counting an attempt (e.g. the account could not be read). */
  async release(id: string, claimId: string, nextAttemptAt: Date, now: Date): Promise<boolean> {
    const result = await this.collection.updateOne(
      { _id: id, status: 'delivering', claimId },
      {
        $set: {
          status: 'scheduled',
          nextAttemptAt,
          leaseUntil: null,
          claimId: null,
          updatedAt: now,
        },
      },
    );
    return result.modifiedCount === 1;
  }

  /** Ends a claimed attempt; `false` when the claim was lost (redelivered meanwhile). */
  async finishAttempt(
    id: string,
    claimId: string,
    update: {
      attempts: number;
      status: DeliveryStatus;
      nextAttemptAt: Date | null;
      lastOutcome: AttemptOutcome;
      lastError: string | null;
      now: Date;
    },
  ): Promise<boolean> {
    const result = await this.collection.updateOne(
      { _id: id, status: 'delivering', claimId },
      {
        $set: {
          attempts: update.attempts,
          status: update.status,
          nextAttemptAt: update.nextAttemptAt,
          lastOutcome: update.lastOutcome,
          lastError: update.lastError,
          leaseUntil: null,
          claimId: null,
          updatedAt: update.now,
        },
      },
    );
    return result.modifiedCount === 1;
  }

  /**
   * Starts a fresh sequence for the job's event(s): attempt 0, due now, a new claim space (an
   * attempt still in flight can no longer finish the document). Old attempts stay.
   */
  async redeliver(jobId: string, event: WebhookEventName | undefined, now: Date): Promise<number> {
    const filter = event === undefined ? { jobId } : { jobId, event };
    const found = await this.collection.find(filter, { projection: { _id: 1 } }).toArray();
    let reset = 0;
    for (const { _id } of found) {
      const result = await this.collection.updateOne(
        { _id },
        {
          $set: {
            status: 'scheduled',
            attempts: 0,
            nextAttemptAt: now,
            leaseUntil: null,
            claimId: null,
            lastOutcome: null,
            lastError: null,
            updatedAt: now,
          },
          $inc: { sequence: 1 },
        },
      );
      reset += result.matchedCount;
    }
    return reset;
  }

  /**
   * Sequences waiting for a retry (at least one attempt made, not finished). One count per
   * status rather than one `$in`: FerretDB serves only top-level equalities from an index, and
   * this runs on every metrics scrape.
   */
  async countPendingRetries(): Promise<number> {
    let pending = 0;
    for (const status of ['scheduled', 'delivering'] as const) {
      pending += await this.collection.countDocuments({ status, attempts: { $gt: 0 } });
    }
    return pending;
  }
}
