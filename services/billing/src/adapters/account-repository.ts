import { KeyedRepository } from '@tamp/kit';
import { isId, ServiceError } from '@tamp/proto';
import type { Db, Filter, UpdateFilter } from 'mongodb';
import type { CreditMovement } from '../domain/credit-movement';
import { secretInGrace } from '../domain/webhook-secret';
import { type AccountDocument, COLLECTIONS, type PostingMarker } from './documents';

/**
 * One posting's guarded update of the account (application/credit-postings.ts decides what is
 * guarded): the balances move and the marker is set only if the account is still as the
 * decision assumed.
 */
export interface AccountPosting {
  accountId: string;
  /** `<kind>_<id>`: the marker that says this posting is applied. */
  markerKey: string;
  movement: CreditMovement;
  periodStart: Date;
  /** The anchor the period was computed with: a changed anchor may move the period. */
  billingCycleAnchor: Date | null;
  /** Exactly this allowance (a posting that empties it and takes the rest from granted). */
  allowanceExactly?: number;
  /** Exactly this version: nothing else changed since the account was read. */
  version?: number;
  /** A reservation: refused when this job's reservation was released. */
  reservedJobId?: string;
  /** Markers of earlier postings to remove in the same update (their ledger says applied). */
  removeMarkers: readonly string[];
}

/** Every update of an account bumps `version`, so a read can serve as an optimistic guard. */
const BUMP_VERSION = { version: 1 } as const;

/** The `accounts` collection: balances, plan, webhook settings and posting markers. */
export class AccountRepository extends KeyedRepository<AccountDocument> {
  constructor(db: Db) {
    super(db, COLLECTIONS.accounts);
  }

  async insert(account: AccountDocument): Promise<void> {
    await this.collection.insertOne(account);
  }

  /** The account; NOT_FOUND for unknown and malformed ids. */
  async get(accountId: string): Promise<AccountDocument> {
    const account = isId('account', accountId) ? await this.find(accountId) : null;
    if (account === null) throw new ServiceError('NOT_FOUND', `Account ${accountId} not found`);
    return account;
  }

  async update(
    accountId: string,
    changes: Partial<Pick<AccountDocument, 'plan' | 'webhookUrl' | 'billingCycleAnchor'>>,
  ): Promise<void> {
    if (Object.keys(changes).length === 0) return;
    await this.collection.updateOne({ _id: accountId }, { $set: changes, $inc: BUMP_VERSION });
  }

  /**
   * Applies one posting; the account after it, or null when a guard failed (the account is not
   * as assumed, or the posting's marker is there already).
   */
  async applyPosting(posting: AccountPosting): Promise<AccountDocument | null> {
    const { movement } = posting;
    const markerPath = `postings.${posting.markerKey}`;
    const filter: Filter<AccountDocument> = {
      _id: posting.accountId,
      periodStart: posting.periodStart,
      billingCycleAnchor: posting.billingCycleAnchor,
      [markerPath]: { $exists: false },
    };
    if (posting.allowanceExactly !== undefined) {
      filter.allowanceRemaining = posting.allowanceExactly;
    } else if (movement.allowance < 0) {
      filter.allowanceRemaining = { $gte: -movement.allowance };
    }
    if (movement.granted < 0) filter.grantedRemaining = { $gte: -movement.granted };
    if (posting.version !== undefined) filter.version = posting.version;
    if (posting.reservedJobId !== undefined) {
      filter[`releasedReservations.${posting.reservedJobId}`] = { $exists: false };
    }
    const marker: PostingMarker = { ...movement, periodStart: posting.periodStart };
    const update = {
      $inc: {
        allowanceRemaining: movement.allowance,
        grantedRemaining: movement.granted,
        ...BUMP_VERSION,
      },
      $set: { [markerPath]: marker },
      ...(posting.removeMarkers.length > 0 && {
        $unset: Object.fromEntries(posting.removeMarkers.map((key) => [`postings.${key}`, ''])),
      }),
    } as UpdateFilter<AccountDocument>;
    return this.collection.findOneAndUpdate(filter, update, { returnDocument: 'after' });
  }

  /** Removes markers whose postings the ledger records as applied. */
  async removeMarkers(accountId: string, markerKeys: readonly string[]): Promise<void> {
    if (markerKeys.length === 0) return;
    await this.collection.updateOne({ _id: accountId }, {
      $unset: Object.fromEntries(markerKeys.map((key) => [`postings.${key}`, ''])),
      $inc: BUMP_VERSION,
    } as UpdateFilter<AccountDocument>);
  }

  /**
   * Marks the job's reservation released, unless its marker says it is applied. Both this and
   * the reservation's update are single-document updates guarded by the other's mark: one of
   * the two wins, never both.
   */
  async releaseReservation(
    accountId: string,
    jobId: string,
    reserveMarkerKey: string,
    at: Date,
  ): Promise<void> {
    await this.collection.updateOne(
      { _id: accountId, [`postings.${reserveMarkerKey}`]: { $exists: false } },
      {
        $set: { [`releasedReservations.${jobId}`]: at },
        $inc: BUMP_VERSION,
      } as UpdateFilter<AccountDocument>,
    );
  }

  /** Moves the account into a new period with a fresh allowance, once: guarded on the old one. */
  async rollOver(
    accountId: string,
    fromPeriodStart: Date,
    toPeriodStart: Date,
    allowance: number,
  ): Promise<void> {
    await this.collection.updateOne(
      { _id: accountId, periodStart: fromPeriodStart },
      { $set: { periodStart: toPeriodStart, allowanceRemaining: allowance }, $inc: BUMP_VERSION },
    );
  }

  /**
   * Makes `sealedSecret` the account's webhook secret, and the current one its previous secret
   * until `validUntil` (a secret replaced earlier is dropped). Guarded on the secret read, so
   * concurrent rotations apply one after the other: every secret handed out was current once.
   */
  async rotateWebhookSecret(
    accountId: string,
    sealedSecret: string,
    validUntil: Date,
  ): Promise<void> {
    for (;;) {
      const account = await this.get(accountId);
      const previousWebhookSecret = { secret: account.webhookSecret, validUntil };
      const { matchedCount } = await this.collection.updateOne(
        { _id: accountId, webhookSecret: account.webhookSecret },
        { $set: { webhookSecret: sealedSecret, previousWebhookSecret }, $inc: BUMP_VERSION },
      );
      if (matchedCount === 1) return;
    }
  }

  /**
   * Clears a previous webhook secret whose grace period is over, so no key material outlives its
   * use. Guarded on that secret: a rotation in between keeps its own previous secret.
   */
  async forgetExpiredWebhookSecret(account: AccountDocument, now: Date): Promise<void> {
    const previous = account.previousWebhookSecret;
    if (previous == null || secretInGrace(previous, now) !== null) return;
    await this.collection.updateOne(
      { _id: account._id, 'previousWebhookSecret.secret': previous.secret },
      { $set: { previousWebhookSecret: null }, $inc: BUMP_VERSION },
    );
  }
}
