import type { UsageReport } from '@tamp/proto';
import type { AccountRepository } from '../adapters/account-repository';
import type { UsageRepository } from '../adapters/usage-repository';
import { billingPeriodAt } from '../domain/billing-period';
import { usageReport } from '../domain/usage-report';

/** The dashboard's usage page for the account's current billing period. */
export class UsageReports {
  constructor(
    private readonly accounts: AccountRepository,
    private readonly usage: UsageRepository,
    private readonly now: () => Date,
  ) {}

  /** Unknown account → NOT_FOUND. */
  async of(accountId: string): Promise<UsageReport> {
    const account = await this.accounts.get(accountId);
    const now = this.now();
    const period = billingPeriodAt(now, account.billingCycleAnchor);
    // One after the other: on FerretDB they share one connection anyway.
    const totals = await this.usage.totals(accountId, period);
    const creditsPerPipeline = await this.usage.creditsPerPipeline(accountId, period);
    const jobsPerDay = await this.usage.perDay(accountId, period, 'jobs');
    const creditsPerDay = await this.usage.perDay(accountId, period, 'credits');
    const unpriced = await this.usage.unpriced(accountId, period);
    return usageReport({
      period,
      now,
      totals,
      creditsPerPipeline,
      jobsPerDay,
      creditsPerDay,
      unpriced,
    });
  }
}
