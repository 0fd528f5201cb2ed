import { isId, LIMITS, newId, ServiceError } from '@tamp/proto';
import type { AccountRepository } from '../adapters/account-repository';
import type { ApiKeyRepository } from '../adapters/api-key-repository';
import type { ApiKeyDocument } from '../adapters/documents';
import { displayPrefix, generateApiKey, hashApiKey, isWellFormedApiKey } from '../domain/api-key';
import type { PlanCatalog } from '../domain/plans';
import type { KeyUseRecorder } from './key-use';

/** API keys: authentication of every public request, and their life cycle. */
export class ApiKeys {
  constructor(
    private readonly keys: ApiKeyRepository,
    private readonly accounts: AccountRepository,
    private readonly plans: PlanCatalog,
    private readonly keyUse: KeyUseRecorder,
    private readonly now: () => Date,
  ) {}

  /**
   * The active key's account and limits; unknown, malformed or revoked keys, and keys whose
   * account is gone, are UNAUTHORIZED. Also what a dashboard sign-in with an API key goes
   * through: it is a use of the key.
   */
  async authenticate(apiKey: string) {
    const key = isWellFormedApiKey(apiKey) ? await this.keys.findByHash(hashApiKey(apiKey)) : null;
    const account =
      key === null || key.revokedAt !== null ? null : await this.accounts.find(key.accountId);
    if (key === null || account === null) {
      throw new ServiceError('UNAUTHORIZED', 'The API key is missing, invalid or revoked');
    }
    this.keyUse.record(key._id);
    const limits = this.plans[account.plan];
    return {
      accountId: account._id,
      plan: account.plan,
      maxUploadBytes: limits.maxUploadBytes,
      rateLimitPerMinute: limits.rateLimitPerMinute,
      keyId: key._id,
    };
  }

  /**
   * A new key of an existing account; the key itself is in this answer only. Refused while the
   * account has LIMITS.activeApiKeysPerAccount active keys (concurrent creations can pass the
   * count together, so a few over it are possible, never without bound).
   */
  async create(accountId: string): Promise<{ keyId: string; apiKey: string }> {
    await this.accounts.get(accountId);
    if ((await this.keys.countActive(accountId)) >= LIMITS.activeApiKeysPerAccount) {
      throw new ServiceError(
        'VALIDATION_ERROR',
        `An account has at most ${LIMITS.activeApiKeysPerAccount} active API keys: revoke one first`,
      );
    }
    return this.mint(accountId);
  }

  /** A new key of an account known to exist (just created): no read of it first. */
  async mint(accountId: string): Promise<{ keyId: string; apiKey: string }> {
    const apiKey = generateApiKey();
    const keyId = newId('apiKey');
    await this.keys.insert({
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

  /** With `accountId`, only that account's key: another's is NOT_FOUND, untouched. */
  async revoke(keyId: string, accountId?: string) {
    const key = isId('apiKey', keyId) ? await this.keys.revoke(keyId, accountId, this.now()) : null;
    if (key === null) throw new ServiceError('NOT_FOUND', `API key ${keyId} not found`);
    return keyView(key);
  }

  async list(accountId: string) {
    await this.accounts.get(accountId);
    return { keys: (await this.keys.list(accountId, LIMITS.listedRevokedApiKeys)).map(keyView) };
  }
}

function keyView(key: ApiKeyDocument) {
  return {
    keyId: key._id,
    accountId: key.accountId,
    displayPrefix: key.displayPrefix,
    createdAt: key.createdAt.toISOString(),
    revokedAt: key.revokedAt?.toISOString() ?? null,
    lastUsedAt: key.lastUsedAt?.toISOString() ?? null,
  };
}
