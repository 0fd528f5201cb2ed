import { insertIfAbsent } from '@tamp/kit';
import { isId, type Plan, ServiceError } from '@tamp/proto';
import type { Collection, Db } from 'mongodb';
import { billingPeriodAt } from '../domain/billing-period';
import type { PlanCatalog } from '../domain/plans';
import { secretInGrace } from '../domain/webhook-secret';
import { type AccountDocument, COLLECTIONS, type LedgerEntry } from './documents';

/** Accounts, and the period rollover of their credit allowance. */
export class AccountStore {
  readonly accounts: Collection<AccountDocument>;
  readonly ledger: Collection<LedgerEntry>;

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
    billingCycleAnchor: Date | null;
  }): Promise<AccountDocument> {
    const now = this.now();
    const document: AccountDocument = {
      _id: account.accountId,
      plan: account.plan,
      webhookUrl: account.webhookUrl,
      webhookSecret: account.sealedWebhookSecret,
      previousWebhookSecret: null,
      billingCycleAnchor: account.billingCycleAnchor,
      createdAt: now,
      periodStart: billingPeriodAt(now, account.billingCycleAnchor).start,
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
      await insertIfAbsent(this.ledger, {
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

  /**
   * A changed `billingCycleAnchor` moves the current period at once (usage reports it); the
   * allowance follows the usual rollover rule: it resets when the period containing now starts
   * after the one it belongs to, and otherwise carries on until the new period ends.
   */
  async update(
    accountId: string,
    changes: { plan?: Plan; webhookUrl?: string | null; billingCycleAnchor?: Date | null },
  ): Promise<AccountDocument> {
    await this.find(accountId);
    const set: Partial<AccountDocument> = {};
    if (changes.plan !== undefined) set.plan = changes.plan;
    if (changes.webhookUrl !== undefined) set.webhookUrl = changes.webhookUrl;
    if (changes.billingCycleAnchor !== undefined) {
      set.billingCycleAnchor = changes.billingCycleAnchor;
    }
    if (Object.keys(set).length > 0) {
      await this.accounts.updateOne({ _id: accountId }, { $set: set, $inc: { version: 1 } });
    }
    return this.find(accountId);
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
      const account = await this.find(accountId);
      const previousWebhookSecret = { secret: account.webhookSecret, validUntil };
      const { matchedCount } = await this.accounts.updateOne(
        { _id: accountId, webhookSecret: account.webhookSecret },
        { $set: { webhookSecret: sealedSecret, previousWebhookSecret }, $inc: { version: 1 } },
      );
      if (matchedCount === 1) return;
    }
  }

  /**
   * Clears a previous webhook secret whose grace period is over, so no key material outlives its
   * use. Guarded on that secret: a rotation in between keeps its own previous secret.
   */
  async forgetExpiredWebhookSecret(account: AccountDocument): Promise<void> {
    const previous = account.previousWebhookSecret;
    if (previous == null || secretInGrace(previous, this.now()) !== null) return;
    await this.accounts.updateOne(
      { _id: account._id, 'previousWebhookSecret.secret': previous.secret },
      { $set: { previousWebhookSecret: null }, $inc: { version: 1 } },
    );
  }
}
