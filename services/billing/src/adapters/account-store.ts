import { isId, type Plan, ServiceError } from '@tamp/proto';
import type { Collection, Db } from 'mongodb';
import { billingPeriodAt } from '../domain/billing-period';
import type { PlanCatalog } from '../domain/plans';
import {
  type AccountDocument,
  COLLECTIONS,
  isDuplicateKeyError,
  type LedgerEntry,
} from './documents';

/** Accounts, and the period rollover of their credit allowance. */
export class AccountStore {
  readonly accounts: Collection<AccountDocument>;
  private readonly ledger: Collection<LedgerEntry>;

  constructor(
    db: Db,
    private readonly plans: PlanCatalog,
    private readonly now: () => Date,
  ) {
    this.accounts = db.collection<AccountDocument>(COLLECTIONS.accounts);
    this.ledger = db.collection<LedgerEntry>(COLLECTIONS.ledger);
  }

  async create(account: {
    accountId: string;
    plan: Plan;
    webhookUrl: string | null;
    sealedWebhookSecret: string;
    /** Credits available in the current period instead of the plan's allowance. */
    credits: number | undefined;
  }): Promise<AccountDocument> {
    const now = this.now();
    const document: AccountDocument = {
      _id: account.accountId,
      plan: account.plan,
      webhookUrl: account.webhookUrl,
      webhookSecret: account.sealedWebhookSecret,
      billingCycleAnchor: null,
      createdAt: now,
      periodStart: billingPeriodAt(now, null).start,
      allowanceRemaining: account.credits ?? this.plans[account.plan].creditsPerPeriod,
      grantedRemaining: 0,
      version: 0,
      postings: {},
    };
    await this.accounts.insertOne(document);
    return document;
  }

  async find(accountId: string): Promise<AccountDocument> {
    const account = isId('account', accountId)
      ? await this.accounts.findOne({ _id: accountId })
      : null;
    if (account === null) throw new ServiceError('NOT_FOUND', `Account ${accountId} not found`);
    return account;
  }

  /**
   * The account with its balances rolled over into the period containing now. The rollover is
   * one guarded update (`periodStart: <the one we read>`), so concurrent callers reset the
   * allowance once; granted credits are untouched. Its ledger entry has a deterministic id and
   * is written first, so a crash between the two leaves only a harmless duplicate-to-be.
   */
  async current(accountId: string): Promise<AccountDocument> {
    for (;;) {
      const account = await this.find(accountId);
      const period = billingPeriodAt(this.now(), account.billingCycleAnchor);
      if (period.start.getTime() <= account.periodStart.getTime()) return account;
      const allowance = this.plans[account.plan].creditsPerPeriod;
      await this.ledger
        .insertOne({
          _id: `period:${accountId}:${period.start.toISOString()}`,
          kind: 'period',
          accountId,
          jobId: null,
          credits: allowance,
          state: 'applied',
          allowance: null,
          granted: null,
          periodStart: period.start,
          createdAt: this.now(),
          appliedAt: this.now(),
        })
        .catch((error: unknown) => {
          if (!isDuplicateKeyError(error)) throw error;
        });
      await this.accounts.updateOne(
        { _id: accountId, periodStart: account.periodStart },
        {
          $set: { periodStart: period.start, allowanceRemaining: allowance },
          $inc: { version: 1 },
        },
      );
    }
  }

  async update(
    accountId: string,
    changes: { plan?: Plan; webhookUrl?: string | null },
  ): Promise<AccountDocument> {
    await this.find(accountId);
    const set: Partial<AccountDocument> = {};
    if (changes.plan !== undefined) set.plan = changes.plan;
    if (changes.webhookUrl !== undefined) set.webhookUrl = changes.webhookUrl;
    if (Object.keys(set).length > 0) {
      await this.accounts.updateOne({ _id: accountId }, { $set: set, $inc: { version: 1 } });
    }
    return this.find(accountId);
  }
}
