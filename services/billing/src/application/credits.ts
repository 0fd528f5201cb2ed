import { randomUUID } from 'node:crypto';
import { type CreditMetrics, recordRefund, recordReservation } from '@tamp/kit';
import { isId, type Pipeline, ServiceError } from '@tamp/proto';
import type { AccountRepository } from '../adapters/account-repository';
import type { LedgerEntry } from '../adapters/documents';
import type { LedgerRepository } from '../adapters/ledger-repository';
import { refundMovement, reservationMovement } from '../domain/credit-movement';
import type { AccountPeriods } from './account-periods';
import { type CreditPostings, markerKeyOf } from './credit-postings';

/**
 * Credits move only through CreditPostings, exactly once per ledger entry: a job's reservation
 * and its refund (both keyed by the job id), and an operator's grant. Reservations and refunds
 * are counted on /metrics (docs/operating.md).
 */
export class Credits {
  constructor(
    private readonly postings: CreditPostings,
    private readonly accounts: AccountRepository,
    private readonly ledger: LedgerRepository,
    private readonly periods: AccountPeriods,
    private readonly now: () => Date,
    private readonly metrics?: CreditMetrics,
  ) {}

  /** Allowance first, then granted credits; INSUFFICIENT_CREDITS (nothing taken) when short. */
  async reserve(request: {
    accountId: string;
    jobId: string;
    credits: number;
    pipeline: Pipeline;
  }): Promise<{ reserved: number; replayed: boolean }> {
    if (!isId('job', request.jobId)) {
      throw new ServiceError('VALIDATION_ERROR', `Not a job id: ${request.jobId}`);
    }
    const outcome = await this.postings.post({
      accountId: request.accountId,
      entryId: `reserve:${request.jobId}`,
      kind: 'reserve',
      jobId: request.jobId,
      credits: request.credits,
      movementFor: (account) => reservationMovement(account, request.credits),
    });
    const answer = {
      reserved: -(outcome.movement.allowance + outcome.movement.granted),
      replayed: outcome.replayed,
    };
    if (this.metrics) recordReservation(this.metrics, request.pipeline, answer);
    return answer;
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
    const answer = await this.refundOnce(request);
    if (this.metrics) recordRefund(this.metrics, answer);
    return answer;
  }

  /** Operator-granted credits, which never expire. */
  async grant(accountId: string, credits: number) {
    const outcome = await this.postings.post({
      accountId,
      entryId: `grant:${randomUUID()}`,
      kind: 'grant',
      jobId: null,
      credits,
      movementFor: () => ({ allowance: 0, granted: credits }),
    });
    const account = outcome.account ?? (await this.accounts.get(accountId));
    return { accountId, grantedCredits: account.grantedRemaining };
  }

  private async refundOnce(request: { accountId: string; jobId: string }) {
    const { accountId, jobId } = request;
    if (!isId('job', jobId)) return { refunded: 0, replayed: false };
    let reservation = await this.settledReservation(accountId, jobId);
    if (reservation === null) {
      await this.accounts.releaseReservation(
        accountId,
        jobId,
        markerKeyOf(`reserve:${jobId}`),
        this.now(),
      );
      this.postings.forget(accountId);
      // Applied in between (its marker stopped the release): refund it like any other.
      reservation = await this.settledReservation(accountId, jobId);
      if (reservation === null) return { refunded: 0, replayed: false };
    }
    const applied = reservation;
    const outcome = await this.postings.post({
      accountId,
      entryId: `refund:${jobId}`,
      kind: 'refund',
      jobId,
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

  /** The job's reservation once applied (completing a crashed one first), else null. */
  private async settledReservation(accountId: string, jobId: string): Promise<LedgerEntry | null> {
    const entryId = `reserve:${jobId}`;
    const account = await this.periods.current(accountId);
    const marker = account.postings?.[markerKeyOf(entryId)];
    if (marker !== undefined) await this.ledger.markApplied(entryId, marker, this.now());
    const reservation = await this.ledger.find(entryId);
    if (reservation === null || reservation.state !== 'applied') return null;
    if (reservation.accountId !== accountId) return null;
    return reservation;
  }
}
