import { ServiceError } from '@tamp/proto';
import type { AccountStore } from '../adapters/account-store';
import type { ApiKeyDocument } from '../adapters/documents';
import type { KeyStore } from '../adapters/key-store';
import type { PlanCatalog } from '../domain/plans';
import type { KeyUseRecorder } from './key-use';

/** API keys: authentication of every public request, and their life cycle. */
export class ApiKeys {
  constructor(
    private readonly keys: KeyStore,
    private readonly accounts: AccountStore,
    private readonly plans: PlanCatalog,
    private readonly keyUse: KeyUseRecorder,
  ) {}

  /** Also what a dashboard sign-in with an API key goes through: it is a use of the key. */
  async authenticate(apiKey: string) {
    const key = await this.keys.verify(apiKey);
    // A key whose account is gone authenticates nobody.
    const account = await this.accounts.find(key.accountId).catch((error: unknown) => {
      if (error instanceof ServiceError && error.code === 'NOT_FOUND') {
        throw new ServiceError('UNAUTHORIZED', 'The API key is missing, invalid or revoked');
      }
      throw error;
    });
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

  async create(accountId: string) {
    await this.accounts.find(accountId);
    return this.keys.create(accountId);
  }

  async revoke(keyId: string, accountId?: string) {
    return keyView(await this.keys.revoke(keyId, accountId));
  }

  async list(accountId: string) {
    await this.accounts.find(accountId);
    return { keys: (await this.keys.list(accountId)).map(keyView) };
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
