import type { CreditBook } from '../adapters/credit-book';

/**
 * Credits move only through the CreditBook, exactly once per ledger entry: a job's reservation
 * and its refund (both keyed by the job id), and an operator's grant.
 */
export class Credits {
  constructor(private readonly book: CreditBook) {}

  reserve(request: { accountId: string; jobId: string; credits: number }) {
    return this.book.reserve(request);
  }

  refund(request: { accountId: string; jobId: string }) {
    return this.book.refund(request);
  }

  async grant(accountId: string, credits: number) {
    return { accountId, grantedCredits: await this.book.grant(accountId, credits) };
  }
}
