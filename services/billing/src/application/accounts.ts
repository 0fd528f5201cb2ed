import type { Logger } from '@tamp/kit';
import { newId, type Plan, ServiceError } from '@tamp/proto';
import type { AccountStore } from '../adapters/account-store';
import type { AccountDocument } from '../adapters/documents';
import type { KeyStore } from '../adapters/key-store';
import type { UsageStore } from '../adapters/usage-store';
import { billingCycleAnchorProblem, billingPeriodAt, creditsNow } from '../domain/billing-period';
import type { PlanCatalog } from '../domain/plans';
import { usageSummary } from '../domain/usage-summary';
import { generateWebhookSecret, type SecretSealer, secretInGrace } from '../domain/webhook-secret';

/** Accounts: creation, changes, the webhook secret and its rotation, the usage report. */
export class Accounts {
  constructor(
    private readonly accounts: AccountStore,
    private readonly keys: KeyStore,
    private readonly usage: UsageStore,
    private readonly plans: PlanCatalog,
    private readonly sealer: SecretSealer,
    /** How long a rotated-out webhook secret keeps signing when the rotation names no period. */
    private readonly webhookSecretGraceMs: number,
    private readonly now: () => Date,
    private readonly logger: Logger,
  ) {}

  async get(accountId: string) {
    const account = await this.accounts.find(accountId);
    await this.accounts.forgetExpiredWebhookSecret(account);
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
    const webhookSecret = generateWebhookSecret();
    const account = await this.accounts.create({
      accountId: newId('account'),
      plan: request.plan,
      webhookUrl: request.webhookUrl ?? null,
      sealedWebhookSecret: this.sealer.seal(webhookSecret),
      credits: request.credits,
      billingCycleAnchor,
    });
    const { apiKey } = await this.keys.create(account._id);
    return { accountId: account._id, apiKey, webhookSecret };
  }

  async update(request: {
    accountId: string;
    plan?: Plan | undefined;
    webhookUrl?: string | null | undefined;
    billingCycleAnchor?: string | null | undefined;
  }) {
    const { accountId, billingCycleAnchor, ...rest } = request;
    const changes = {
      ...rest,
      ...(billingCycleAnchor !== undefined && {
        billingCycleAnchor: billingCycleAnchor === null ? null : this.anchorAt(billingCycleAnchor),
      }),
    };
    return this.view(await this.accounts.update(accountId, changes));
  }

  async rotateWebhookSecret(
    accountId: string,
    gracePeriodSeconds: number | undefined,
  ): Promise<{ webhookSecret: string; previousValidUntil: string }> {
    const webhookSecret = generateWebhookSecret();
    const graceMs =
      gracePeriodSeconds === undefined ? this.webhookSecretGraceMs : gracePeriodSeconds * 1000;
    const previousValidUntil = new Date(this.now().getTime() + graceMs);
    await this.accounts.rotateWebhookSecret(
      accountId,
      this.sealer.seal(webhookSecret),
      previousValidUntil,
    );
    // Never the secret itself: it goes to the operator in the reply only.
    this.logger.info({ accountId, previousValidUntil }, 'webhook secret rotated');
    return { webhookSecret, previousValidUntil: previousValidUntil.toISOString() };
  }

  async usageOf(accountId: string) {
    const account = await this.accounts.find(accountId);
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
