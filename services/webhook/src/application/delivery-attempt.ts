import { randomUUID } from 'node:crypto';
import {
  annotateActiveSpan,
  inSpan,
  type Logger,
  markActiveSpanFailed,
  storedContext,
} from '@tamp/kit';
import { jitteredDelayMs, type TargetPolicy, type WEBHOOK_DELIVERY_HEADERS } from '@tamp/proto';
import type { AttemptDocument, AttemptRepository } from '../adapters/attempt-repository';
import type { BillingAccounts, WebhookAccount } from '../adapters/billing-accounts';
import type { DeliveryDocument, DeliveryRepository } from '../adapters/delivery-repository';
import type { HostnameResolver } from '../adapters/hostname-resolver';
import { deliverWebhook } from '../adapters/safe-http-client';
import { type AttemptOutcome, nextStep } from '../domain/delivery-state';
import type { WebhookEventName } from '../domain/payload';
import { signDelivery } from '../domain/signature';
import type { WebhookMetrics } from './webhook-metrics';

const USER_AGENT = 'Tamp-Webhooks/1.0';

export interface AttemptSettings {
  /** Delays before each retry (its length = the number of retries after the first attempt). */
  retryScheduleMs: readonly number[];
  policy: TargetPolicy;
  /** Deadline of one attempt. */
  timeoutMs: number;
  /** Wait before trying again when billing is unavailable (at most; equal jitter). */
  unavailableRetryMs: number;
  /** Recorded with every attempt. */
  instance: string;
  /** Tests inject a fake DNS; production uses the system resolver. */
  resolveHostname?: HostnameResolver | undefined;
}

/** What one HTTP attempt needs: a scheduled sequence and a test delivery both provide it. */
export interface OutgoingDelivery {
  target: string;
  event: WebhookEventName;
  /** The exact body text: it is signed and sent byte for byte. */
  body: string;
  /** Standard Webhooks `webhook-id` of the job event. */
  webhookId: string;
}

/** How one HTTP attempt went, as it is recorded. */
export interface SentAttempt {
  attemptedAt: Date;
  deliveryId: string;
  outcome: AttemptOutcome;
  statusCode: number | null;
  /** Null when nothing was sent (the delivery could not be signed). */
  latencyMs: number | null;
  error: string | null;
  retryAfter?: string | undefined;
}

/** An attempt to record; one that sent nothing may have no delivery id or status. */
export type AttemptResult = Omit<SentAttempt, 'deliveryId' | 'statusCode'> &
  Partial<Pick<SentAttempt, 'deliveryId' | 'statusCode'>>;

/** The `webhook_attempts` record of an attempt, in the log `listDeliveries` reads. */
export function attemptRecordOf(
  result: AttemptResult,
  of: Omit<
    AttemptDocument,
    '_id' | 'attemptedAt' | 'statusCode' | 'latencyMs' | 'outcome' | 'error'
  >,
): AttemptDocument {
  return {
    _id: result.deliveryId ?? `dlv_${randomUUID()}`,
    ...of,
    attemptedAt: result.attemptedAt,
    statusCode: result.statusCode ?? null,
    latencyMs: result.latencyMs,
    outcome: result.outcome,
    error: result.error,
  };
}

/**
 * One signed HTTP attempt, the only code that sends one: the headers, the signatures (the
 * account's current secret and, during a rotation's grace period, the replaced one), the safe
 * HTTP client with the deployment's target policy and the attempt deadline, and the outcome it
 * classifies. Scheduled attempts and test deliveries both send through it; neither caches the
 * account it is given.
 */
export class SignedSender {
  constructor(
    private readonly settings: Pick<AttemptSettings, 'policy' | 'timeoutMs' | 'resolveHostname'>,
    private readonly clock: () => Date,
  ) {}

  async send(outgoing: OutgoingDelivery, account: WebhookAccount): Promise<SentAttempt> {
    const attemptedAt = this.clock();
    const deliveryId = `dlv_${randomUUID()}`;
    let headers: Record<string, string>;
    try {
      // Every header proto's WEBHOOK_DELIVERY_HEADERS names (the type checks none is missing).
      const delivery: Record<keyof typeof WEBHOOK_DELIVERY_HEADERS, string> = {
        'X-Service-Event': outgoing.event,
        'X-Service-Delivery': deliveryId,
        ...signDelivery({
          secret: account.webhookSecret,
          previousSecrets:
            account.previousWebhookSecret === null ? [] : [account.previousWebhookSecret.secret],
          body: outgoing.body,
          timestamp: Math.floor(attemptedAt.getTime() / 1000),
          webhookId: outgoing.webhookId,
        }),
      };
      headers = { 'Content-Type': 'application/json', 'User-Agent': USER_AGENT, ...delivery };
    } catch (error) {
      return {
        attemptedAt,
        deliveryId,
        outcome: 'failed',
        statusCode: null,
        latencyMs: null,
        error: `could not sign the delivery: ${(error as Error).message}`,
      };
    }
    const { policy, timeoutMs, resolveHostname } = this.settings;
    const result = await deliverWebhook({
      url: outgoing.target,
      body: Buffer.from(outgoing.body, 'utf8'),
      headers,
      policy,
      timeoutMs,
      ...(resolveHostname ? { resolveHostname } : {}),
    });
    // The request itself has no client span (its trace context is withheld from the receiver):
    // the active span says what the receiver answered.
    if (result.statusCode !== undefined) {
      annotateActiveSpan({ 'http.response.status_code': result.statusCode });
    }
    return {
      attemptedAt,
      deliveryId,
      outcome: result.outcome,
      statusCode: result.statusCode ?? null,
      latencyMs: result.latencyMs,
      error: result.error ?? null,
      retryAfter: result.retryAfter,
    };
  }
}

/**
 * One attempt of a claimed delivery sequence: read the account's secrets, sign and send
 * (SignedSender), record the attempt, and move the sequence to its next step
 * (domain/delivery-state.ts).
 */
export class DeliveryAttempt {
  private readonly sender: SignedSender;

  constructor(
    private readonly deliveries: DeliveryRepository,
    private readonly attempts: AttemptRepository,
    private readonly accounts: BillingAccounts,
    private readonly metrics: WebhookMetrics,
    private readonly settings: AttemptSettings,
    private readonly clock: () => Date,
    /** Jitter source of the retry delays. */
    private readonly random: () => number,
    private readonly logger: Logger,
  ) {
    this.sender = new SignedSender(settings, clock);
  }

  /**
   * One span per attempt, in the trace of the job event that scheduled the sequence. Returns
   * when the sequence is due again, if this attempt scheduled it (a retry, or a postponement),
   * so the scheduler wakes for it instead of polling.
   */
  run(delivery: DeliveryDocument, claimId: string): Promise<Date | null> {
    const attributes = { 'tamp.job_id': delivery.jobId, 'webhook.attempt': delivery.attempts + 1 };
    return inSpan(
      'webhook deliver',
      { parent: storedContext(delivery.traceContext), attributes },
      () => this.attempt(delivery, claimId),
    );
  }

  private async attempt(delivery: DeliveryDocument, claimId: string): Promise<Date | null> {
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
      const now = this.clock();
      // Jittered, so the deliveries postponed by one outage do not all come back together.
      const delayMs = jitteredDelayMs(this.settings.unavailableRetryMs, this.random);
      const retryAt = new Date(now.getTime() + delayMs);
      await this.deliveries.release(delivery._id, claimId, retryAt, now);
      return retryAt;
    }
    if (account === null) {
      return this.finish(delivery, claimId, attemptNumber, {
        attemptedAt: this.clock(),
        outcome: 'refused',
        latencyMs: null,
        error: 'the account no longer exists; nothing was sent',
      });
    }
    const sent = await this.sender.send(delivery, account);
    if (sent.latencyMs !== null) this.metrics.attemptDuration.observe(sent.latencyMs / 1000);
    return this.finish(delivery, claimId, attemptNumber, sent);
  }

  private async finish(
    delivery: DeliveryDocument,
    claimId: string,
    attemptNumber: number,
    result: AttemptResult,
  ): Promise<Date | null> {
    if (result.outcome !== 'delivered') markActiveSpanFailed(result.error ?? result.outcome);
    const finishedAt = this.clock().getTime();
    const step = nextStep(
      attemptNumber,
      { outcome: result.outcome, retryAfter: result.retryAfter },
      this.settings.retryScheduleMs,
      finishedAt,
      this.random,
    );
    // The record first: an attempt that happened is never lost, even if the update below is.
    await this.attempts.insert(
      attemptRecordOf(result, {
        jobId: delivery.jobId,
        event: delivery.event,
        target: delivery.target,
        sequence: delivery.sequence,
        attempt: attemptNumber,
        instance: this.settings.instance,
      }),
    );
    const nextAttemptAt = step.nextAttemptAt === null ? null : new Date(step.nextAttemptAt);
    const kept = await this.deliveries.finishAttempt(delivery._id, claimId, {
      attempts: attemptNumber,
      status: step.status,
      nextAttemptAt,
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
    return kept ? nextAttemptAt : null;
  }
}
