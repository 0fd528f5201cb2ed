import { KeyedRepository } from '@tamp/kit';
import type { Db } from 'mongodb';
import { COLLECTIONS } from './documents';

/** A dashboard session; the token itself is never stored. */
export interface DashboardSessionDocument {
  /** SHA-256 (hex) of the `tss_…` token. */
  _id: string;
  /** Names the session in logs and views; authenticates nothing. */
  sessionId: string;
  accountId: string;
  createdAt: Date;
  expiresAt: Date;
  /** Set by sign-out or a revocation; the session is refused from then on. */
  endedAt: Date | null;
}

export class SessionRepository extends KeyedRepository<DashboardSessionDocument> {
  constructor(db: Db) {
    super(db, COLLECTIONS.dashboardSessions);
  }

  async open(session: DashboardSessionDocument): Promise<void> {
    await this.collection.insertOne(session);
  }

  /**
   * True when the session exists, now ended (by this call or before: the first end time is
   * kept); false when no such session exists.
   */
  async end(tokenHash: string, at: Date): Promise<boolean> {
    const { matchedCount } = await this.collection.updateOne(
      { _id: tokenHash, endedAt: null },
      { $set: { endedAt: at } },
    );
    return matchedCount === 1 || (await this.find(tokenHash)) !== null;
  }

  /**
   * Ends every session of the account not ended yet (expired ones not swept yet included); how
   * many this call ended.
   */
  async endAllOf(accountId: string, at: Date): Promise<number> {
    const { modifiedCount } = await this.collection.updateMany(
      { accountId, endedAt: null },
      { $set: { endedAt: at } },
    );
    return modifiedCount;
  }

  /**
   * Deletes the account's sessions past their expiry, which every read refuses anyway; how
   * many. By the account's index: the filter leads with `accountId`.
   */
  async deleteExpiredOf(accountId: string, now: Date): Promise<number> {
    const { deletedCount } = await this.collection.deleteMany({
      accountId,
      expiresAt: { $lte: now },
    });
    return deletedCount;
  }
}
