import { KeyedRepository } from '@tamp/kit';
import type { Db } from 'mongodb';
import { COLLECTIONS, type LedgerEntry, type LedgerKind, type PostingMarker } from './documents';

/**
 * The `ledger` collection: one entry per credit movement, under a deterministic id
 * (`reserve:<jobId>`, `refund:<jobId>`, `grant:<uuid>`, `period:<account>:<start>`), so whoever
 * inserts an id first owns that posting (application/credit-postings.ts).
 */
export class LedgerRepository extends KeyedRepository<LedgerEntry> {
  constructor(db: Db) {
    super(db, COLLECTIONS.ledger);
  }

  /** True when this call created the pending entry, false when the id existed already. */
  insertPending(entry: {
    entryId: string;
    kind: LedgerKind;
    accountId: string;
    jobId: string | null;
    credits: number;
    at: Date;
  }): Promise<boolean> {
    return this.insertIfAbsent({
      _id: entry.entryId,
      kind: entry.kind,
      accountId: entry.accountId,
      jobId: entry.jobId,
      credits: entry.credits,
      state: 'pending',
      allowance: null,
      granted: null,
      periodStart: null,
      createdAt: entry.at,
      appliedAt: null,
    });
  }

  /** Records what the account's marker says was applied; a no-op once applied. */
  async markApplied(entryId: string, applied: PostingMarker, at: Date): Promise<void> {
    await this.collection.updateOne(
      { _id: entryId, state: 'pending' },
      {
        $set: {
          state: 'applied',
          allowance: applied.allowance,
          granted: applied.granted,
          periodStart: applied.periodStart,
          appliedAt: at,
        },
      },
    );
  }

  /** The rollover's entry, written before the account moves: a repeat finds it there. */
  async recordPeriod(
    accountId: string,
    periodStart: Date,
    allowance: number,
    at: Date,
  ): Promise<void> {
    await this.insertIfAbsent({
      _id: `period:${accountId}:${periodStart.toISOString()}`,
      kind: 'period',
      accountId,
      jobId: null,
      credits: allowance,
      state: 'applied',
      allowance: null,
      granted: null,
      periodStart,
      createdAt: at,
      appliedAt: at,
    });
  }
}
