import { KeyedRepository } from '@tamp/kit';
import type { Db } from 'mongodb';
import { COLLECTIONS } from './documents';

/** A one-time sign-in link; the token itself is never stored. */
export interface SignInLinkDocument {
  /** SHA-256 (hex) of the `tsl_…` token. */
  _id: string;
  accountId: string;
  createdAt: Date;
  expiresAt: Date;
  /** Set by the one redemption the link allows. */
  usedAt: Date | null;
}

export class SignInLinkRepository extends KeyedRepository<SignInLinkDocument> {
  constructor(db: Db) {
    super(db, COLLECTIONS.signInLinks);
  }

  async mint(link: SignInLinkDocument): Promise<void> {
    await this.collection.insertOne(link);
  }

  /**
   * The link's account when this call redeemed it, else null (unknown, used or expired). One
   * guarded findAndModify: of concurrent redemptions exactly one matches `usedAt: null`, and it
   * gets the account from the same command, so deleting spent links never races a redemption.
   * The whole document comes back: the patched FerretDB 1.24 fails a findAndModify that asks
   * for a projection.
   */
  async redeem(tokenHash: string, at: Date): Promise<string | null> {
    const redeemed = await this.collection.findOneAndUpdate(
      { _id: tokenHash, usedAt: null, expiresAt: { $gt: at } },
      { $set: { usedAt: at } },
    );
    return redeemed?.accountId ?? null;
  }

  /**
   * Deletes the account's links that can no longer be redeemed (used, or past their expiry);
   * how many. A deleted link is refused as an unknown one is, with the same answer.
   */
  async deleteSpentOf(accountId: string, now: Date): Promise<number> {
    const { deletedCount } = await this.collection.deleteMany({
      accountId,
      $or: [{ usedAt: { $ne: null } }, { expiresAt: { $lte: now } }],
    });
    return deletedCount;
  }
}
