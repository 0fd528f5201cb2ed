import type { Logger } from '@tamp/kit';
import { ServiceError } from '@tamp/proto';
import { LRUCache } from 'lru-cache';
import type { AccountPosting, AccountRepository } from '../adapters/account-repository';
import type { AccountDocument, LedgerKind, PostingMarker } from '../adapters/documents';
import type { LedgerRepository } from '../adapters/ledger-repository';
import type { CreditMovement } from '../domain/credit-movement';
import type { AccountPeriods } from './account-periods';

export interface PostingRequest {
  accountId: string;
  entryId: string;
  kind: LedgerKind;
  jobId: string | null;
  credits: number;
  /** The movement to apply given the account as read; null when credits are short. */
  movementFor(account: AccountDocument): CreditMovement | null;
}

export interface PostingOutcome {
  movement: CreditMovement;
  /** True when this call did not move anything: the posting had been applied before. */
  replayed: boolean;
  /** The account right after this call's update; null for a replay. */
  account: AccountDocument | null;
}

/** Guarded updates lose races by design; this bounds the retries of one posting. */
const MAX_ATTEMPTS = 200;
/** Accounts whose last known state is kept, so a posting need not read the account first. */
const SNAPSHOT_ACCOUNTS = 10_000;
/** How long a removable marker waits for its account's next update before one of its own. */
const MARKER_REMOVAL_DELAY_MS = 1_000;

/** The marker's field name for a ledger entry id: no dots in ids, and `:` becomes `_`. */
export function markerKeyOf(entryId: string): string {
  return entryId.replace(':', '_');
}

/**
 * Moves credits exactly once per ledger entry id, safe against concurrent calls, retries,
 * several billing replicas and crashes at any point, in three database commands per posting.
 *
 * MongoDB gives atomicity per document only, so the account document itself remembers that a
 * posting was applied, in the same update that moves the balances: the update sets the marker
 * `postings.<kind>_<id>` (holding the movement) and is guarded by the marker's absence. The
 * steps of a posting:
 *
 *   1. insert the ledger entry `{ state: "pending" }` under its deterministic id. The caller that
 *      inserts it is the entry's *owner*; anyone finding it already there is a *retrier*;
 *   2. decide the movement on the account as last known (an owner: the state this replica's
 *      previous update returned, when it is of the current period) or as read now (a retrier,
 *      and any caller whose guarded update failed);
 *   3. one guarded update of the account: `{ periodStart and billingCycleAnchor as decided on,
 *      the balances the movement takes from, postings.<key> absent }` → `$inc` both buckets and
 *      `version`, `$set` the marker; it returns the account after, which becomes the last known
 *      state. A retrier also guards `version: <the one read in 2>`;
 *   4. the ledger entry → `applied` with the movement;
 *   5. the owner removes the marker, folded into the account's next update (or its own update
 *      once the account is quiet for a second): removal is only ever after step 4.
 *
 * Why a state not read now is safe: every fact the decision rests on is in the update's filter.
 * A stale state makes the update fail, never apply wrongly, and the caller then reads the
 * account. Taking from granted credits depends on the allowance being exactly what was seen
 * (allowance first), so such a movement guards the allowance by equality. Refusals (credits
 * short, a released reservation) are decided on a fresh read only.
 *
 * Crash between 1 and 3: the entry stays `pending` and no marker exists, so nothing was taken;
 * a retry (a retrier now) applies it. Crash between 3 and 4: the marker is on the account; a
 * retry reads it in step 2, completes step 4 from it and moves nothing. Crash between 4 and 5:
 * the entry says `applied`; the leftover marker costs a few bytes.
 *
 * Why the retrier's version guard: the owner removes the marker (5) only after the entry is
 * `applied` (4). A retrier reads the account (2) *before* it reads the entry. If its update (3)
 * succeeds, the account did not change in between, so at its read either the marker was still
 * there (it would have stopped), or the owner had not applied the posting yet, in which case
 * the owner's own step 3 now fails on the marker the retrier set. Either way one application.
 * Only owners remove markers, so markers set by retriers stay (retries are rare). Owners, the
 * common case, need no version guard: 200 concurrent reservations on one account cost O(n)
 * updates, not O(n²).
 *
 * A reservation that finds credits short leaves its entry `pending` with no marker: nothing is
 * taken, and a later retry for the same job may still succeed.
 */
export class CreditPostings {
  private readonly lastKnown = new LRUCache<string, AccountDocument>({ max: SNAPSHOT_ACCOUNTS });
  /** Per account, markers of owned postings whose ledger entry says applied. */
  private readonly removableMarkers = new Map<string, Set<string>>();
  private removalTimer: NodeJS.Timeout | null = null;
  private removing: Promise<void> = Promise.resolve();
  /** Set by settle: markers left then stay on their accounts (harmless, see above). */
  private settled = false;

  constructor(
    private readonly accounts: AccountRepository,
    private readonly ledger: LedgerRepository,
    private readonly periods: AccountPeriods,
    private readonly now: () => Date,
    private readonly logger: Logger,
  ) {}

  async post(request: PostingRequest): Promise<PostingOutcome> {
    const { accountId, entryId } = request;
    const markerKey = markerKeyOf(entryId);
    // The account must exist before anything is written under its name; a state read here is
    // as fresh as any for the first decision.
    let justRead = this.lastKnown.has(accountId) ? null : await this.readAccount(accountId);
    const owner = await this.ledger.insertPending({ ...request, at: this.now() });
    let readNow = !owner;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const account =
        justRead !== null && owner
          ? justRead
          : readNow
            ? await this.readAccount(accountId)
            : await this.knownAccount(accountId);
      justRead = null;
      const marker = account.state.postings?.[markerKey];
      if (marker !== undefined) {
        // Applied already (by a crashed or concurrent call); only the ledger may lag behind.
        await this.recordApplied(request, marker, owner);
        return { movement: movementOf(marker), replayed: true, account: null };
      }
      if (!owner) {
        const replay = await this.replayOfEntry(request);
        if (replay !== null) return replay;
      }
      const decision = this.decide(request, account.state, account.fresh);
      if (decision === 'read again') {
        readNow = true;
        continue;
      }
      const removeMarkers = this.takeRemovableMarkers(accountId);
      const after = await this.accounts.applyPosting({
        ...decision,
        ...(!owner && { version: account.state.version }),
        removeMarkers,
      });
      if (after === null) {
        // Lost a race (balances, rollover, a concurrent retry of this posting), or the state
        // decided on was stale: read the account and decide again.
        this.addRemovableMarkers(accountId, removeMarkers);
        this.lastKnown.delete(accountId);
        readNow = true;
        continue;
      }
      this.lastKnown.set(accountId, after);
      await this.recordApplied(
        request,
        { ...decision.movement, periodStart: decision.periodStart },
        owner,
      );
      return { movement: decision.movement, replayed: false, account: after };
    }
    throw new ServiceError('UNAVAILABLE', 'Credits are too contended right now; retry shortly');
  }

  /** Forgets the account's last known state after a write outside the postings. */
  forget(accountId: string): void {
    this.lastKnown.delete(accountId);
  }

  /** Removes the markers still waiting for their account's next update (on shutdown). */
  async settle(): Promise<void> {
    this.settled = true;
    if (this.removalTimer !== null) clearTimeout(this.removalTimer);
    this.removalTimer = null;
    await this.removing;
    await this.removeWaitingMarkers();
  }

  /** The update to make, or 'read again' when the state decided on may be stale. */
  private decide(
    request: PostingRequest,
    account: AccountDocument,
    fresh: boolean,
  ): Omit<AccountPosting, 'removeMarkers' | 'version'> | 'read again' {
    if (
      request.kind === 'reserve' &&
      account.releasedReservations?.[request.jobId!] !== undefined
    ) {
      throw new ServiceError(
        'UNAVAILABLE',
        `The reservation of ${request.jobId} was released: its creation was abandoned`,
      );
    }
    const movement = request.movementFor(account);
    if (movement === null) {
      if (!fresh) return 'read again';
      throw new ServiceError('INSUFFICIENT_CREDITS', 'Not enough credits for this job', {
        required: request.credits,
        available: account.allowanceRemaining + account.grantedRemaining,
      });
    }
    return {
      accountId: request.accountId,
      markerKey: markerKeyOf(request.entryId),
      movement,
      periodStart: account.periodStart,
      billingCycleAnchor: account.billingCycleAnchor,
      ...(movement.granted < 0 && { allowanceExactly: account.allowanceRemaining }),
      ...(request.kind === 'reserve' && { reservedJobId: request.jobId! }),
    };
  }

  /** A retrier's entry: a replay when it is applied already, null when it still has to be. */
  private async replayOfEntry(request: PostingRequest): Promise<PostingOutcome | null> {
    const entry = await this.ledger.find(request.entryId);
    if (entry === null) throw new Error(`Ledger entry ${request.entryId} vanished`);
    if (entry.accountId !== request.accountId) {
      throw new ServiceError('VALIDATION_ERROR', `${request.entryId} is another account's`);
    }
    if (entry.state !== 'applied') return null;
    const movement = { allowance: entry.allowance ?? 0, granted: entry.granted ?? 0 };
    return { movement, replayed: true, account: null };
  }

  private async recordApplied(
    request: PostingRequest,
    applied: PostingMarker,
    owner: boolean,
  ): Promise<void> {
    await this.ledger.markApplied(request.entryId, applied, this.now());
    if (owner) this.addRemovableMarkers(request.accountId, [markerKeyOf(request.entryId)]);
  }

  private async readAccount(accountId: string): Promise<{ state: AccountDocument; fresh: true }> {
    const state = await this.periods.current(accountId);
    this.lastKnown.set(accountId, state);
    return { state, fresh: true };
  }

  private async knownAccount(
    accountId: string,
  ): Promise<{ state: AccountDocument; fresh: boolean }> {
    const known = this.lastKnown.get(accountId);
    if (known !== undefined && this.periods.isCurrent(known)) return { state: known, fresh: false };
    return this.readAccount(accountId);
  }

  private takeRemovableMarkers(accountId: string): string[] {
    const keys = this.removableMarkers.get(accountId);
    this.removableMarkers.delete(accountId);
    return keys === undefined ? [] : [...keys];
  }

  private addRemovableMarkers(accountId: string, keys: readonly string[]): void {
    if (keys.length === 0) return;
    const waiting = this.removableMarkers.get(accountId) ?? new Set<string>();
    for (const key of keys) waiting.add(key);
    this.removableMarkers.set(accountId, waiting);
    if (this.removalTimer === null && !this.settled) {
      this.removalTimer = setTimeout(() => {
        this.removalTimer = null;
        this.removing = this.removing.then(() => this.removeWaitingMarkers());
      }, MARKER_REMOVAL_DELAY_MS);
      this.removalTimer.unref();
    }
  }

  /** One update per account whose markers no posting has carried away meanwhile. */
  private async removeWaitingMarkers(): Promise<void> {
    for (const accountId of [...this.removableMarkers.keys()]) {
      const keys = this.takeRemovableMarkers(accountId);
      try {
        await this.accounts.removeMarkers(accountId, keys);
        this.lastKnown.delete(accountId);
      } catch (error) {
        this.logger.warn({ err: error, accountId }, 'posting markers not removed; retried later');
        this.addRemovableMarkers(accountId, keys);
        return;
      }
    }
  }
}

function movementOf(marker: CreditMovement): CreditMovement {
  return { allowance: marker.allowance, granted: marker.granted };
}
