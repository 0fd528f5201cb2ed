import { KeyedRepository, WRITE_BEHIND_LINGER_MS, WriteBatcher } from '@tamp/kit';
import type { Db } from 'mongodb';
import { COLLECTIONS, type LedgerEntry, type LedgerKind, type PostingMarker } from './documents';

/**
 * The `ledger` collection: one entry per credit movement, under a deterministic id
 * (`reserve:<jobId>`, `refund:<jobId>`, `grant:<uuid>`, `period:<account>:<start>`), so whoever
 * inserts an id first owns that posting (application/credit-postings.ts).
 */
export class LedgerRepository extends KeyedRepository<LedgerEntry> {
  private readonly applications = new WriteBatcher<Application>(
    async (applications) => {
      // One updateMany by `_id` per distinct movement (most reservations of a busy service take
      // the same from the same bucket): FerretDB serves `_id: { $in }` from the index, while a
      // bulk of single updates took it seconds per statement on a large ledger.
      for (const group of groupedByMovement(applications)) {
        await this.collection.updateMany(
          { _id: { $in: group.entryIds }, state: 'pending' },
          applying(group.applied, group.at),
        );
      }
    },
    { lingerMs: WRITE_BEHIND_LINGER_MS },
  );

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
    await this.collection.updateOne({ _id: entryId, state: 'pending' }, applying(applied, at));
  }

  /**
   * markApplied, written behind: gathered with others for kit's WRITE_BEHIND_LINGER_MS and sent
   * as one bulk write. For an owner's posting, whose account already holds the marker that
   * makes it exactly-once: until the entry says applied, a retry or a refund reads the marker
   * and completes the entry itself. Settles once written.
   */
  markAppliedBehind(entryId: string, applied: PostingMarker, at: Date): Promise<void> {
    return this.applications.add({ entryId, applied, at });
  }

  /** Writes the applications still gathering (on stop). */
  flush(): Promise<void> {
    return this.applications.flush();
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

interface Application {
  entryId: string;
  applied: PostingMarker;
  at: Date;
}

function groupedByMovement(
  applications: readonly Application[],
): { entryIds: string[]; applied: PostingMarker; at: Date }[] {
  const groups = new Map<string, { entryIds: string[]; applied: PostingMarker; at: Date }>();
  for (const { entryId, applied, at } of applications) {
    const key = `${applied.allowance}:${applied.granted}:${applied.periodStart.toISOString()}`;
    const group = groups.get(key);
    if (group === undefined) groups.set(key, { entryIds: [entryId], applied, at });
    else group.entryIds.push(entryId);
  }
  return [...groups.values()];
}

function applying(applied: PostingMarker, at: Date) {
  return {
    $set: {
      state: 'applied' as const,
      allowance: applied.allowance,
      granted: applied.granted,
      periodStart: applied.periodStart,
      appliedAt: at,
    },
  };
}
