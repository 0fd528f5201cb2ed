import { randomUUID } from 'node:crypto';
import { insertIfAbsent } from '@tamp/kit';
import { isId, ServiceError } from '@tamp/proto';
import type { Collection, Filter, UpdateFilter } from 'mongodb';
import {
  type CreditMovement,
  refundMovement,
  reservationMovement,
} from '../domain/credit-movement';
import type { AccountStore } from './account-store';
import type { AccountDocument, LedgerEntry, LedgerKind } from './documents';

/** Where an account remembers reservations released before they were applied (see refund). */
const RELEASED_FIELD = 'releasedReservations';

/** Guarded updates lose races by design; this bounds the retries of one posting. */
const MAX_ATTEMPTS = 200;

interface PostingRequest {
  accountId: string;
  entryId: string;
  kind: LedgerKind;
  jobId: string | null;
  credits: number;
  /** The movement to apply given a fresh read of the account; null when credits are short. */
  movementFor(account: AccountDocument): CreditMovement | null;
}

interface PostingOutcome {
  movement: CreditMovement;
  /** True when this call did not move anything: the posting had been applied before. */
  replayed: boolean;
}

/**
 * Moves credits exactly once per ledger entry id (`reserve:<jobId>`, `refund:<jobId>`,
 * `grant:<uuid>`), safe against concurrent calls, retries and crashes at any point.
 *
 * MongoDB gives atomicity per document only, so the account document itself must remember that
 * a posting was applied, in the same update that moves the balances: the update sets the marker
 * `postings.<kind>_<id>` (holding the movement) and is guarded by the marker's absence. The
 * steps of a posting:
 *
 *   1. read the account (rolled over into the current period);
 *   2. insert the ledger entry `{ state: "pending" }` with its deterministic id. The caller that
 *      inserts it is the entry's *owner*; anyone finding it already there is a *retrier*, who
 *      reads it: `applied` → a replay, nothing moves;
 *   3. one guarded update of the account: `{ periodStart, allowanceRemaining ≥ take,
 *      grantedRemaining ≥ take, postings.<key> absent }` → `$inc` both buckets and `version`,
 *      `$set` the marker. A retrier also guards `version: <the one read in 1>`;
 *   4. ledger entry → `applied` with the movement (copied from the marker);
 *   5. the owner `$unset`s the marker.
 *
 * Crash between 2 and 3: the entry stays `pending` and no marker exists, so nothing was taken;
 * a retry (a retrier now) applies it. Crash between 3 and 4: the marker is on the account; a
 * retry sees it in step 1, completes step 4 from it and moves nothing. Crash between 4 and 5:
 * the entry says `applied`; the leftover marker only costs a few bytes.
 *
 * Why the retrier's version guard: the owner removes the marker (5) only after the entry is
 * `applied` (4). A retrier read the account (1) *before* the entry (2). If its update (3)
 * succeeds, the account did not change in between, so at its read either the marker was still
 * there (it would have stopped), or the owner had not applied the posting yet, in which case
 * the owner's own step 3 now fails on the marker the retrier set. Either way one application.
 * Only the owner removes markers, so markers left by retriers stay (retries are rare). Owners,
 * the common case, need no version guard: 200 concurrent reservations on one account cost
 * O(n) updates, not O(n²).
 *
 * A reservation that finds credits short leaves its entry `pending` with no marker: nothing is
 * taken, and a later retry for the same job may still succeed.
 */
export class CreditBook {
  private readonly ledger: Collection<LedgerEntry>;

  /** The ledger is the account store's: a period rollover writes its entries too. */
  constructor(
    private readonly accountStore: AccountStore,
    private readonly now: () => Date,
  ) {
    this.ledger = accountStore.ledger;
  }

  /** Allowance first, then granted credits; INSUFFICIENT_CREDITS (nothing taken) when short. */
  async reserve(request: {
    accountId: string;
    jobId: string;
    credits: number;
  }): Promise<{ reserved: number; replayed: boolean }> {
    if (!isId('job', request.jobId)) {
      throw new ServiceError('VALIDATION_ERROR', `Not a job id: ${request.jobId}`);
    }
    const outcome = await this.post({
      accountId: request.accountId,
      entryId: `reserve:${request.jobId}`,
      kind: 'reserve',
      jobId: request.jobId,
      credits: request.credits,
      movementFor: (account) => reservationMovement(account, request.credits),
    });
    return {
      reserved: -(outcome.movement.allowance + outcome.movement.granted),
      replayed: outcome.replayed,
    };
  }

  /**
   * Gives back what the job's reservation took, to the same buckets, exactly once, and makes
   * sure a reservation that has not been applied yet never will be: a creation abandoned while
   * its reserve request was still on its way (a time-out) is released by this call, and that
   * late request then finds the reservation released and moves nothing. So a reservation can
   * never outlive its job, whatever order the two requests arrive in.
   */
  async refund(request: {
    accountId: string;
    jobId: string;
  }): Promise<{ refunded: number; replayed: boolean }> {
    if (!isId('job', request.jobId)) return { refunded: 0, replayed: false };
    let reservation = await this.settledReservation(request.accountId, request.jobId);
    if (reservation === null) {
      await this.blockReservation(request.accountId, request.jobId);
      // Applied in between (its marker stopped the block): refund it like any other.
      reservation = await this.settledReservation(request.accountId, request.jobId);
      if (reservation === null) return { refunded: 0, replayed: false };
    }
    const applied = reservation;
    const outcome = await this.post({
      accountId: request.accountId,
      entryId: `refund:${request.jobId}`,
      kind: 'refund',
      jobId: request.jobId,
      credits: -((applied.allowance ?? 0) + (applied.granted ?? 0)),
      movementFor: (account) =>
        refundMovement(
          {
            allowance: applied.allowance ?? 0,
            granted: applied.granted ?? 0,
            periodStart: applied.periodStart ?? account.periodStart,
          },
          account.periodStart,
        ).movement,
    });
    return {
      refunded: outcome.movement.allowance + outcome.movement.granted,
      replayed: outcome.replayed,
    };
  }

  /**
   * Marks the job's reservation released on the account, unless it is applied already (its
   * marker present). Every reservation's update is guarded by this mark's absence, and both
   * are single-document updates of the account: one of the two wins, never both.
   */
  private async blockReservation(accountId: string, jobId: string): Promise<void> {
    await this.accounts().updateOne(
      { _id: accountId, [`postings.${markerKey(`reserve:${jobId}`)}`]: { $exists: false } },
      {
        $set: { [`${RELEASED_FIELD}.${jobId}`]: this.now() },
        $inc: { version: 1 },
      } as UpdateFilter<AccountDocument>,
    );
  }

  /** Operator-granted credits, which never expire. Returns the granted balance after. */
  async grant(accountId: string, credits: number): Promise<number> {
    await this.post({
      accountId,
      entryId: `grant:${randomUUID()}`,
      kind: 'grant',
      jobId: null,
      credits,
      movementFor: () => ({ allowance: 0, granted: credits }),
    });
    return (await this.accountStore.find(accountId)).grantedRemaining;
  }

  /** The job's reservation once applied (completing a crashed one first), else null. */
  private async settledReservation(accountId: string, jobId: string): Promise<LedgerEntry | null> {
    const entryId = `reserve:${jobId}`;
    const account = await this.accountStore.current(accountId);
    const marker = account.postings?.[markerKey(entryId)];
    if (marker !== undefined) await this.markApplied(entryId, marker);
    const reservation = await this.ledger.findOne({ _id: entryId });
    if (reservation === null || reservation.state !== 'applied') return null;
    if (reservation.accountId !== accountId) return null;
    return reservation;
  }

  private async post(request: PostingRequest): Promise<PostingOutcome> {
    const key = markerKey(request.entryId);
    const markerPath = `postings.${key}`;
    let owner: boolean | undefined;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const account = await this.accountStore.current(request.accountId);
      const marker = account.postings?.[key];
      if (marker !== undefined) {
        // Applied already (by a crashed or concurrent call); only the ledger may lag behind.
        await this.markApplied(request.entryId, marker);
        if (owner === true) await this.removeMarker(request.accountId, markerPath);
        return { movement: pick(marker), replayed: true };
      }
      if (owner === undefined) owner = await this.insertPending(request);
      if (!owner) {
        const entry = await this.ledger.findOne({ _id: request.entryId });
        if (entry === null) throw new Error(`Ledger entry ${request.entryId} vanished`);
        if (entry.accountId !== request.accountId) {
          throw new ServiceError('VALIDATION_ERROR', `${request.entryId} is another account's`);
        }
        if (entry.state === 'applied') {
          return {
            movement: { allowance: entry.allowance ?? 0, granted: entry.granted ?? 0 },
            replayed: true,
          };
        }
      }
      if (request.kind === 'reserve' && account[RELEASED_FIELD]?.[request.jobId!] !== undefined) {
        throw new ServiceError(
          'UNAVAILABLE',
          `The reservation of ${request.jobId} was released: its creation was abandoned`,
        );
      }
      const movement = request.movementFor(account);
      if (movement === null) {
        throw new ServiceError('INSUFFICIENT_CREDITS', 'Not enough credits for this job', {
          required: request.credits,
          available: account.allowanceRemaining + account.grantedRemaining,
        });
      }
      const filter: Filter<AccountDocument> = {
        _id: request.accountId,
        periodStart: account.periodStart,
        [markerPath]: { $exists: false },
      };
      if (movement.allowance < 0) filter.allowanceRemaining = { $gte: -movement.allowance };
      if (movement.granted < 0) filter.grantedRemaining = { $gte: -movement.granted };
      if (!owner) filter.version = account.version;
      if (request.kind === 'reserve') {
        filter[`${RELEASED_FIELD}.${request.jobId}`] = { $exists: false };
      }
      const update = {
        $inc: {
          allowanceRemaining: movement.allowance,
          grantedRemaining: movement.granted,
          version: 1,
        },
        $set: { [markerPath]: { ...movement, periodStart: account.periodStart } },
      } as UpdateFilter<AccountDocument>;
      const result = await this.accounts().updateOne(filter, update);
      if (result.matchedCount === 1) {
        await this.markApplied(request.entryId, { ...movement, periodStart: account.periodStart });
        if (owner) await this.removeMarker(request.accountId, markerPath);
        return { movement, replayed: false };
      }
      // Lost a race (balances, rollover, a concurrent retry of this posting): read again.
    }
    throw new ServiceError('UNAVAILABLE', 'Credits are too contended right now; retry shortly');
  }

  private accounts(): Collection<AccountDocument> {
    return this.accountStore.accounts;
  }

  /** True when this call created the pending entry, false when it existed already. */
  private async insertPending(request: PostingRequest): Promise<boolean> {
    return insertIfAbsent(this.ledger, {
      _id: request.entryId,
      kind: request.kind,
      accountId: request.accountId,
      jobId: request.jobId,
      credits: request.credits,
      state: 'pending',
      allowance: null,
      granted: null,
      periodStart: null,
      createdAt: this.now(),
      appliedAt: null,
    });
  }

  private async markApplied(
    entryId: string,
    applied: CreditMovement & { periodStart: Date },
  ): Promise<void> {
    await this.ledger.updateOne(
      { _id: entryId, state: 'pending' },
      {
        $set: {
          state: 'applied',
          allowance: applied.allowance,
          granted: applied.granted,
          periodStart: applied.periodStart,
          appliedAt: this.now(),
        },
      },
    );
  }

  private async removeMarker(accountId: string, markerPath: string): Promise<void> {
    await this.accounts().updateOne({ _id: accountId, [markerPath]: { $exists: true } }, {
      $unset: { [markerPath]: '' },
      $inc: { version: 1 },
    } as UpdateFilter<AccountDocument>);
  }
}

/** Field names may not contain dots; job ids and uuids do not, the `:` becomes `_`. */
function markerKey(entryId: string): string {
  return entryId.replace(':', '_');
}

function pick(movement: CreditMovement): CreditMovement {
  return { allowance: movement.allowance, granted: movement.granted };
}
