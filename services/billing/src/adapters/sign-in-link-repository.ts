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
   * guarded update: of concurrent redemptions exactly one matches `usedAt: null`.
   */
  async redeem(tokenHash: string, at: Date): Promise<string | null> {
    const { matchedCount } = await this.collection.updateOne(
      { _id: tokenHash, usedAt: null, expiresAt: { $gt: at } },
      { $set: { usedAt: at } },
    );
    if (matchedCount !== 1) return null;
    return (await this.find(tokenHash))?.accountId ?? null;
  }
}
