import { KeyedRepository } from '@tamp/kit';
import type { Db } from 'mongodb';
import { type ApiKeyDocument, COLLECTIONS } from './documents';

/** The `api_keys` collection: a key's SHA-256 and display prefix, never the key itself. */
export class ApiKeyRepository extends KeyedRepository<ApiKeyDocument> {
  constructor(db: Db) {
    super(db, COLLECTIONS.apiKeys);
  }

  async insert(key: ApiKeyDocument): Promise<void> {
    await this.collection.insertOne(key);
  }

  findByHash(hash: string): Promise<ApiKeyDocument | null> {
    return this.collection.findOne({ hash });
  }

  /**
   * The key after revoking it; idempotent (a second revocation keeps the first time). With
   * `accountId`, only a key of that account: null for another's, untouched.
   */
  async revoke(
    keyId: string,
    accountId: string | undefined,
    at: Date,
  ): Promise<ApiKeyDocument | null> {
    const owned = accountId === undefined ? {} : { accountId };
    await this.collection.updateOne(
      { _id: keyId, revokedAt: null, ...owned },
      { $set: { revokedAt: at } },
    );
    return this.collection.findOne({ _id: keyId, ...owned });
  }

  /**
   * Unguarded: replicas recording the same key may land neighbouring minutes in either order,
   * an error of a minute that "last used" can live with.
   */
  async recordUse(keyId: string, minute: Date): Promise<void> {
    await this.collection.updateOne({ _id: keyId }, { $set: { lastUsedAt: minute } });
  }

  countActive(accountId: string): Promise<number> {
    return this.collection.countDocuments({ accountId, revokedAt: null });
  }

  /** The account's active keys and its `revokedLimit` last revoked ones, oldest first. */
  async list(accountId: string, revokedLimit: number): Promise<ApiKeyDocument[]> {
    const [active, revoked] = await Promise.all([
      this.collection.find({ accountId, revokedAt: null }).toArray(),
      this.collection
        .find({ accountId, revokedAt: { $ne: null } })
        .sort({ revokedAt: -1, _id: 1 })
        .limit(revokedLimit)
        .toArray(),
    ]);
    return [...active, ...revoked].sort(
      (a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a._id.localeCompare(b._id),
    );
  }
}
