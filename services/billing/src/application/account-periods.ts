import type { AccountRepository } from '../adapters/account-repository';
import type { AccountDocument } from '../adapters/documents';
import type { LedgerRepository } from '../adapters/ledger-repository';
import { billingPeriodAt } from '../domain/billing-period';
import type { PlanCatalog } from '../domain/plans';

/** The period rollover of an account's credit allowance. */
export class AccountPeriods {
  constructor(
    private readonly accounts: AccountRepository,
    private readonly ledger: LedgerRepository,
    private readonly plans: PlanCatalog,
    private readonly now: () => Date,
  ) {}

  /** True when `account`'s balances belong to the period containing now. */
  isCurrent(account: AccountDocument): boolean {
    const period = billingPeriodAt(this.now(), account.billingCycleAnchor);
    return period.start.getTime() <= account.periodStart.getTime();
  }

  /**
   * The account read now, its balances rolled over into the period containing now. The rollover
   * is one guarded update (on the period read), so concurrent callers reset the allowance once;
   * granted credits are untouched. Its ledger entry has a deterministic id and is written first,
   * so a crash between the two leaves only an entry that the repeat finds.
   */
  async current(accountId: string): Promise<AccountDocument> {
    for (;;) {
      const account = await this.accounts.get(accountId);
      if (this.isCurrent(account)) return account;
      const period = billingPeriodAt(this.now(), account.billingCycleAnchor);
      const allowance = this.plans[account.plan].creditsPerPeriod;
      await this.ledger.recordPeriod(accountId, period.start, allowance, this.now());
      await this.accounts.rollOver(accountId, account.periodStart, period.start, allowance);
    }
  }
}
