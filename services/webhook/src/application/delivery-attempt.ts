import { randomUUID } from 'node:crypto';
import {
  annotateActiveSpan,
  inSpan,
  type Logger,
  markActiveSpanFailed,
  storedContext,
} from '@tamp/kit';
import type { TargetPolicy } from '@tamp/proto';
import type { BillingAccounts, WebhookAccount } from '../adapters/billing-accounts';
import type { DeliveryDocument, DeliveryStore } from '../adapters/delivery-store';
import type { HostnameResolver } from '../adapters/hostname-resolver';
import { deliverWebhook } from '../adapters/safe-http-client';
import { type AttemptOutcome, nextStep } from '../domain/delivery-state';
import { signDelivery } from '../domain/signature';
import type { WebhookMetrics } from './webhook-metrics';

const USER_AGENT = 'Tamp-Webhooks/1.0';

export interface AttemptSettings {
  /** Delays before each retry (its length = the number of retries after the first attempt). */
  retryScheduleMs: readonly number[];
  policy: TargetPolicy;
  /** Deadline of one attempt. */
  timeoutMs: number;
  /** Wait before trying again when billing is unavailable. */
  unavailableRetryMs: number;
  /** Recorded with every attempt. */
  instance: string;
  /** Tests inject a fake DNS; production uses the system resolver. */
  resolveHostname?: HostnameResolver | undefined;
}

interface AttemptResult {
  attemptedAt: Date;
  deliveryId?: string;
  outcome: AttemptOutcome;
  statusCode?: number | null;
  latencyMs: number | null;
  error: string | null;
  retryAfter?: string | undefined;
}

/**
 * One attempt of a claimed delivery sequence: read the account's secrets, sign, send through
 * the safe HTTP client, record the attempt, and move the sequence to its next step
 * (domain/delivery-state.ts).
 */
export class DeliveryAttempt {
  constructor(
    private readonly store: DeliveryStore,
    private readonly accounts: BillingAccounts,
    private readonly metrics: WebhookMetrics,
    private readonly settings: AttemptSettings,
    /** Milliseconds since the epoch. */
    private readonly clock: () => number,
    /** Jitter source of the retry delays. */
    private readonly random: () => number,
    private readonly logger: Logger,
  ) {}

  /** One span per attempt, in the trace of the job event that scheduled the sequence. */
  run(delivery: DeliveryDocument, claimId: string): Promise<void> {
    const attributes = { 'tamp.job_id': delivery.jobId, 'webhook.attempt': delivery.attempts + 1 };
    return inSpan(
      'webhook deliver',
      { parent: storedContext(delivery.traceContext), attributes },
      () => this.attempt(delivery, claimId),
    );
  }

  private async attempt(delivery: DeliveryDocument, claimId: string): Promise<void> {
    const attemptNumber = delivery.attempts + 1;
    // Read for every attempt, never cached: an attempt that starts after a rotation returned
    // is signed with the new secret (and, during its grace period, the replaced one as well).
    let account: WebhookAccount | null;
    try {
      account = await this.accounts.find(delivery.accountId);
    } catch (error) {
      // Not the receiver's fault: no attempt is counted, the sequence is due again shortly.
      this.logger
        .child({ jobId: delivery.jobId, event: delivery.event })
        .warn({ err: error }, 'billing unavailable; webhook attempt postponed');
      const retryAt = new Date(this.clock() + this.settings.unavailableRetryMs);
      await this.store.release(delivery._id, claimId, retryAt, new Date(this.clock()));
      return;
    }
    if (account === null) {
      await this.finish(delivery, claimId, attemptNumber, {
        attemptedAt: new Date(this.clock()),
        outcome: 'refused',
        latencyMs: null,
        error: 'the account no longer exists; nothing was sent',
      });
      return;
    }
    const attemptedAt = new Date(this.clock());
    const deliveryId = `dlv_${randomUUID()}`;
    let headers: Record<string, string>;
    try {
      headers = {
        'Content-Type': 'application/json',
        'User-Agent': USER_AGENT,
        'X-Service-Event': delivery.event,
        'X-Service-Delivery': deliveryId,
        ...signDelivery({
          secret: account.webhookSecret,
          previousSecrets:
            account.previousWebhookSecret === null ? [] : [account.previousWebhookSecret.secret],
          body: delivery.body,
          timestamp: Math.floor(attemptedAt.getTime() / 1000),
          webhookId: delivery.webhookId,
        }),
      };
    } catch (error) {
      await this.finish(delivery, claimId, attemptNumber, {
        attemptedAt,
        deliveryId,
        outcome: 'failed',
        latencyMs: null,
        error: `could not sign the delivery: ${(error as Error).message}`,
      });
      return;
    }
    const { policy, timeoutMs, resolveHostname } = this.settings;
    const result = await deliverWebhook({
      url: delivery.target,
      body: Buffer.from(delivery.body, 'utf8'),
      headers,
      policy,
      timeoutMs,
      ...(resolveHostname ? { resolveHostname } : {}),
    });
    this.metrics.attemptDuration.observe(result.latencyMs / 1000);
    // The request itself has no client span (its trace context is withheld from the receiver):
    // the attempt's span says what the receiver answered.
    if (result.statusCode !== undefined) {
      annotateActiveSpan({ 'http.response.status_code': result.statusCode });
    }
    await this.finish(delivery, claimId, attemptNumber, {
      attemptedAt,
      deliveryId,
      outcome: result.outcome,
      statusCode: result.statusCode ?? null,
      latencyMs: result.latencyMs,
      error: result.error ?? null,
      retryAfter: result.retryAfter,
    });
  }

  private async finish(
    delivery: DeliveryDocument,
    claimId: string,
    attemptNumber: number,
    result: AttemptResult,
  ): Promise<void> {
    if (result.outcome !== 'delivered') markActiveSpanFailed(result.error ?? result.outcome);
    const finishedAt = this.clock();
    const step = nextStep(
      attemptNumber,
      { outcome: result.outcome, retryAfter: result.retryAfter },
      this.settings.retryScheduleMs,
      finishedAt,
      this.random,
    );
    // The record first: an attempt that happened is never lost, even if the update below is.
    await this.store.recordAttempt({
      _id: result.deliveryId ?? `dlv_${randomUUID()}`,
      jobId: delivery.jobId,
      event: delivery.event,
      sequence: delivery.sequence,
      attempt: attemptNumber,
      attemptedAt: result.attemptedAt,
      target: delivery.target,
      statusCode: result.statusCode ?? null,
      latencyMs: result.latencyMs,
      outcome: result.outcome,
      error: result.error,
      instance: this.settings.instance,
    });
    const kept = await this.store.finishAttempt(delivery._id, claimId, {
      attempts: attemptNumber,
      status: step.status,
      nextAttemptAt: step.nextAttemptAt === null ? null : new Date(step.nextAttemptAt),
      lastOutcome: result.outcome,
      lastError: result.error,
      now: new Date(finishedAt),
    });
    const metricOutcome =
      result.outcome === 'failed' && step.status === 'exhausted' ? 'exhausted' : result.outcome;
    this.metrics.deliveriesTotal.inc({ outcome: metricOutcome });
    const fields = {
      jobId: delivery.jobId,
      event: delivery.event,
      attempt: attemptNumber,
      outcome: result.outcome,
      statusCode: result.statusCode ?? null,
      status: step.status,
      ...(step.status === 'scheduled' ? { retryInMs: step.delayMs } : {}),
      ...(kept ? {} : { superseded: true }),
    };
    if (result.outcome === 'delivered') this.logger.info(fields, 'webhook delivered');
    else this.logger.warn({ ...fields, error: result.error }, 'webhook attempt did not succeed');
  }
}
