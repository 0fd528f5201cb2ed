import { type CreditMetrics, recordRefund, recordReservation } from '@tamp/kit';
import type { Pipeline } from '@tamp/proto';
import type { CreditBook } from '../adapters/credit-book';

/**
 * Credits move only through the CreditBook, exactly once per ledger entry: a job's reservation
 * and its refund (both keyed by the job id), and an operator's grant. Reservations and refunds
 * are counted on /metrics (README "Operating Tamp").
 */
export class Credits {
  constructor(
    private readonly book: CreditBook,
    private readonly metrics?: CreditMetrics,
  ) {}

  async reserve(request: {
    accountId: string;
    jobId: string;
    credits: number;
    pipeline: Pipeline;
  }) {
    const answer = await this.book.reserve(request);
    if (this.metrics) recordReservation(this.metrics, request.pipeline, answer);
    return answer;
  }

  async refund(request: { accountId: string; jobId: string }) {
    const answer = await this.book.refund(request);
    if (this.metrics) recordRefund(this.metrics, answer);
    return answer;
  }

  async grant(accountId: string, credits: number) {
    return { accountId, grantedCredits: await this.book.grant(accountId, credits) };
  }
}
