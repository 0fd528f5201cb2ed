import { isId, newId, ServiceError } from '@tamp/proto';
import type { Collection, Db } from 'mongodb';
import { displayPrefix, generateApiKey, hashApiKey, isWellFormedApiKey } from '../domain/api-key';
import { type ApiKeyDocument, COLLECTIONS } from './documents';

/** API keys: only their SHA-256 and a display prefix are stored; the key is shown once. */
export class KeyStore {
  private readonly keys: Collection<ApiKeyDocument>;

  constructor(
    db: Db,
    private readonly now: () => Date,
  ) {
    this.keys = db.collection<ApiKeyDocument>(COLLECTIONS.apiKeys);
  }

  async create(accountId: string): Promise<{ keyId: string; apiKey: string }> {
    const apiKey = generateApiKey();
    const keyId = newId('apiKey');
    await this.keys.insertOne({
      _id: keyId,
      hash: hashApiKey(apiKey),
      accountId,
      displayPrefix: displayPrefix(apiKey),
      createdAt: this.now(),
      revokedAt: null,
      lastUsedAt: null,
    });
    return { keyId, apiKey };
  }

  /** The active key matching `apiKey`; unknown, malformed or revoked → UNAUTHORIZED. */
  async verify(apiKey: string): Promise<ApiKeyDocument> {
    const key = isWellFormedApiKey(apiKey)
      ? await this.keys.findOne({ hash: hashApiKey(apiKey) })
      : null;
    if (key === null || key.revokedAt !== null) {
      throw new ServiceError('UNAUTHORIZED', 'The API key is missing, invalid or revoked');
    }
    return key;
  }

  /**
   * Idempotent: revoking twice keeps the first revocation time. With `accountId`, only a key of
   * that account: another's is NOT_FOUND, untouched.
   */
  async revoke(keyId: string, accountId?: string): Promise<ApiKeyDocument> {
    const owned = accountId === undefined ? {} : { accountId };
    if (isId('apiKey', keyId)) {
      await this.keys.updateOne(
        { _id: keyId, revokedAt: null, ...owned },
        { $set: { revokedAt: this.now() } },
      );
    }
    const key = isId('apiKey', keyId) ? await this.keys.findOne({ _id: keyId, ...owned }) : null;
    if (key === null) throw new ServiceError('NOT_FOUND', `API key ${keyId} not found`);
    return key;
  }

  /**
   * Unguarded: replicas recording the same key may land neighbouring minutes in either order,
   * an error of a minute that "last used" can live with.
   */
  async recordUse(keyId: string, minute: Date): Promise<void> {
    await this.keys.updateOne({ _id: keyId }, { $set: { lastUsedAt: minute } });
  }

  async list(accountId: string): Promise<ApiKeyDocument[]> {
    return this.keys.find({ accountId }).sort({ createdAt: 1, _id: 1 }).toArray();
  }
}
