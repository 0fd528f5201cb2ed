import type { Logger } from '@tamp/kit';
import { newId, newWebhookSecret, type Plan, ServiceError } from '@tamp/proto';
import type { AccountNotifications } from '../adapters/account-notifications';
import type { AccountRepository } from '../adapters/account-repository';
import type { AccountDocument } from '../adapters/documents';
import type { UsageRepository } from '../adapters/usage-repository';
import { billingCycleAnchorProblem, billingPeriodAt, creditsNow } from '../domain/billing-period';
import type { PlanCatalog } from '../domain/plans';
import { usageSummary } from '../domain/usage-summary';
import { type SecretSealer, secretInGrace } from '../domain/webhook-secret';
import type { ApiKeys } from './api-keys';

/** Accounts: creation, changes, the webhook secret and its rotation, the usage report. */
export class Accounts {
  constructor(
    private readonly accounts: AccountRepository,
    private readonly keys: ApiKeys,
    private readonly usage: UsageRepository,
    private readonly plans: PlanCatalog,
    private readonly sealer: SecretSealer,
    /** How long a rotated-out webhook secret keeps signing when the rotation names no period. */
    private readonly webhookSecretGraceMs: number,
    private readonly now: () => Date,
    private readonly logger: Logger,
    private readonly notifications: AccountNotifications,
  ) {}

  async get(accountId: string) {
    const account = await this.accounts.get(accountId);
    await this.accounts.forgetExpiredWebhookSecret(account, this.now());
    return this.view(account);
  }

  async create(request: {
    plan: Plan;
    webhookUrl?: string | null | undefined;
    credits?: number | undefined;
    billingCycleAnchor?: string | undefined;
  }): Promise<{ accountId: string; apiKey: string; webhookSecret: string }> {
    const billingCycleAnchor =
      request.billingCycleAnchor === undefined ? null : this.anchorAt(request.billingCycleAnchor);
    const webhookSecret = newWebhookSecret();
    const now = this.now();
    const account: AccountDocument = {
      _id: newId('account'),
      plan: request.plan,
      webhookUrl: request.webhookUrl ?? null,
      webhookSecret: this.sealer.seal(webhookSecret),
      previousWebhookSecret: null,
      billingCycleAnchor,
      createdAt: now,
      periodStart: billingPeriodAt(now, billingCycleAnchor).start,
      allowanceRemaining: request.credits ?? this.plans[request.plan].creditsPerPeriod,
      grantedRemaining: 0,
      version: 0,
      postings: {},
    };
    await this.accounts.insert(account);
    const { apiKey } = await this.keys.mint(account._id);
    return { accountId: account._id, apiKey, webhookSecret };
  }

  /**
   * A changed `billingCycleAnchor` moves the current period at once (usage reports it); the
   * allowance follows the usual rollover rule: it resets when the period containing now starts
   * after the one it belongs to, and otherwise carries on until the new period ends.
   */
  async update(request: {
    accountId: string;
    plan?: Plan | undefined;
    webhookUrl?: string | null | undefined;
    billingCycleAnchor?: string | null | undefined;
  }) {
    const { accountId, plan, webhookUrl, billingCycleAnchor } = request;
    await this.accounts.get(accountId);
    await this.accounts.update(accountId, {
      ...(plan !== undefined && { plan }),
      ...(webhookUrl !== undefined && { webhookUrl }),
      ...(billingCycleAnchor !== undefined && {
        billingCycleAnchor: billingCycleAnchor === null ? null : this.anchorAt(billingCycleAnchor),
      }),
    });
    this.notifications.changed(accountId);
    return this.view(await this.accounts.get(accountId));
  }

  async rotateWebhookSecret(
    accountId: string,
    gracePeriodSeconds: number | undefined,
  ): Promise<{ webhookSecret: string; previousValidUntil: string }> {
    const webhookSecret = newWebhookSecret();
    const graceMs =
      gracePeriodSeconds === undefined ? this.webhookSecretGraceMs : gracePeriodSeconds * 1000;
    const previousValidUntil = new Date(this.now().getTime() + graceMs);
    await this.accounts.rotateWebhookSecret(
      accountId,
      this.sealer.seal(webhookSecret),
      previousValidUntil,
    );
    this.notifications.changed(accountId);
    // Never the secret itself: it goes to the operator in the reply only.
    this.logger.info({ accountId, previousValidUntil }, 'webhook secret rotated');
    return { webhookSecret, previousValidUntil: previousValidUntil.toISOString() };
  }

  async usageOf(accountId: string) {
    const account = await this.accounts.get(accountId);
    const period = billingPeriodAt(this.now(), account.billingCycleAnchor);
    return usageSummary(period, await this.usage.totals(accountId, period));
  }

  private view(account: AccountDocument) {
    const { plans, sealer } = this;
    // The webhook service signs with whatever this returns, so the grace rule lives here alone.
    const previous = secretInGrace(account.previousWebhookSecret, this.now());
    return {
      accountId: account._id,
      plan: account.plan,
      maxUploadBytes: plans[account.plan].maxUploadBytes,
      rateLimitPerMinute: plans[account.plan].rateLimitPerMinute,
      webhookUrl: account.webhookUrl,
      webhookSecret: sealer.open(account.webhookSecret),
      previousWebhookSecret:
        previous === null
          ? null
          : { secret: sealer.open(previous.secret), validUntil: previous.validUntil.toISOString() },
      billingCycleAnchor: account.billingCycleAnchor?.toISOString() ?? null,
      createdAt: account.createdAt.toISOString(),
      credits: creditsNow(account, plans[account.plan].creditsPerPeriod, this.now()),
    };
  }

  /** Parses an anchor from a request, refusing one in the future (VALIDATION_ERROR). */
  private anchorAt(iso: string): Date {
    const anchor = new Date(iso);
    const problem = billingCycleAnchorProblem(anchor, this.now());
    if (problem !== null) {
      throw new ServiceError('VALIDATION_ERROR', `billingCycleAnchor ${problem}`, [
        { path: 'billingCycleAnchor', message: problem },
      ]);
    }
    return anchor;
  }
}
