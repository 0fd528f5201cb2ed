import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { type ConsumerMessages, type JsMsg, jetstream } from '@nats-io/jetstream';
import type { Subscription } from '@nats-io/nats-core';
import {
  type Db,
  type Logger,
  type NatsConnection,
  provisionIndexes,
  type Registry,
  type Rpc,
} from '@tamp/kit';
import {
  billingEndpoints,
  type JobEvent,
  jobEvent,
  ServiceError,
  type Topology,
  webhookEndpoints,
} from '@tamp/proto';
import { Counter, Gauge, Histogram } from 'prom-client';
import { type DeliveryDocument, DeliveryStore, WEBHOOK_INDEXES } from './adapters/delivery-store';
import type { HostnameResolver } from './adapters/hostname-resolver';
import { DEFAULT_DELIVERY_TIMEOUT_MS, deliverWebhook } from './adapters/safe-http-client';
import { nextStep } from './domain/delivery-state';
import { buildPayload, deliveryKey, serializePayload, webhookIdFor } from './domain/payload';
import { signDelivery } from './domain/signature';
import type { TargetPolicy } from './domain/target-policy';

export interface WebhookServiceOptions {
  nats: NatsConnection;
  topology: Topology;
  rpc: Rpc;
  db: Db;
  policy: TargetPolicy;
  /** Delays before each retry (its length = the number of retries after the first attempt). */
  retryScheduleMs: readonly number[];
  logger: Logger;
  metrics: Registry;
  /** Deadline of one attempt; default 10 s (spec). */
  timeoutMs?: number;
  /** Milliseconds since the epoch; injectable for tests. */
  clock?: () => number;
  /** Jitter source for `nextRetryDelay`. */
  random?: () => number;
  /** How often Mongo is polled for due sequences; default 250 ms. */
  pollIntervalMs?: number;
  /** How long a claimed attempt may take before another instance takes it over. */
  leaseMs?: number;
  /** Attempts in flight at once per instance; default 16. */
  maxConcurrentAttempts?: number;
  /** Wait before trying again when a peer (billing, Mongo) is unavailable; default 5 s. */
  unavailableRetryMs?: number;
  /** Recorded with every attempt; default `<hostname>:<pid>:<random>`. */
  instanceId?: string;
  /** Tests inject a fake DNS; production uses the system resolver. */
  resolveHostname?: HostnameResolver;
}

export interface WebhookService {
  /** Stops consuming and polling, waits for attempts in flight, unsubscribes the endpoints. */
  stop(): Promise<void>;
}

const USER_AGENT = 'Tamp-Webhooks/1.0';

/**
 * The webhook service: turns `events.job.*` into one durable delivery sequence per job event
 * (in `webhook_deliveries`), delivers it with signed, retried, policy-checked attempts (each
 * recorded in `webhook_attempts`), and serves `listDeliveries` / `redeliver`.
 */
export async function startWebhookService(options: WebhookServiceOptions): Promise<WebhookService> {
  const { nats, topology, rpc, db, policy, logger } = options;
  const schedule = [...options.retryScheduleMs];
  const timeoutMs = options.timeoutMs ?? DEFAULT_DELIVERY_TIMEOUT_MS;
  const clock = options.clock ?? Date.now;
  const random = options.random ?? Math.random;
  const pollIntervalMs = options.pollIntervalMs ?? 250;
  const leaseMs = options.leaseMs ?? timeoutMs + 30_000;
  const maxConcurrent = options.maxConcurrentAttempts ?? 16;
  const unavailableRetryMs = options.unavailableRetryMs ?? 5_000;
  const instance = options.instanceId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const now = () => new Date(clock());

  await provisionIndexes(db, WEBHOOK_INDEXES);
  const store = new DeliveryStore(db);

  const deliveriesTotal = new Counter({
    name: 'tamp_webhook_deliveries_total',
    help: 'Webhook delivery attempts by outcome (delivered, failed = will retry, exhausted = last retry failed, refused)',
    labelNames: ['outcome'] as const,
    registers: [options.metrics],
  });
  const attemptDuration = new Histogram({
    name: 'tamp_webhook_attempt_duration_seconds',
    help: 'Duration of one webhook delivery attempt, body included',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [options.metrics],
  });
  let stopped = false;
  new Gauge({
    name: 'tamp_webhook_retries_pending',
    help: 'Delivery sequences with a failed attempt that wait for (or are making) a retry',
    registers: [options.metrics],
    async collect() {
      if (stopped) return;
      try {
        this.set(await store.countPendingRetries());
      } catch (error) {
        logger.warn({ err: error }, 'could not count pending webhook retries');
      }
    },
  });

  // ---- Events: one sequence per job event --------------------------------------------------

  async function accountOf(accountId: string) {
    return rpc.call(billingEndpoints.getAccount, { accountId });
  }

  /** `ack`: done (scheduled, duplicate, or nothing to do). `retry`: a peer is down; try later. */
  async function scheduleEvent(event: JobEvent): Promise<'ack' | 'retry'> {
    const log = logger.child({ jobId: event.jobId, event: event.event });
    // Inline jobs never emit webhooks: their result was in the response (docs/decisions.md#webhooks).
    if (event.inline) return 'ack';
    const id = deliveryKey(event.jobId, event.event);
    // A redelivered event whose sequence exists needs no account lookup.
    if ((await store.get(id)) !== null) return 'ack';
    let target = event.webhookUrl;
    let targetSource: 'job' | 'account' = 'job';
    if (target === null || target === '') {
      try {
        target = (await accountOf(event.accountId)).webhookUrl;
        targetSource = 'account';
      } catch (error) {
        if (error instanceof ServiceError && isGone(error)) {
          log.warn({ accountId: event.accountId }, 'account not found; no webhook to send');
          return 'ack';
        }
        log.warn({ err: error }, 'billing unavailable; the event will be retried');
        return 'retry';
      }
    }
    if (target === null || target === '') return 'ack';
    const createdAt = now();
    const inserted = await store.schedule({
      _id: id,
      jobId: event.jobId,
      accountId: event.accountId,
      event: event.event,
      target,
      targetSource,
      body: serializePayload(buildPayload(event)),
      webhookId: webhookIdFor(event.jobId, event.event),
      nextAttemptAt: createdAt,
      createdAt,
    });
    log.info({ target, targetSource, duplicate: !inserted }, 'webhook delivery scheduled');
    return 'ack';
  }

  async function handleMessage(message: JsMsg): Promise<void> {
    let parsed: ReturnType<typeof jobEvent.safeParse>;
    try {
      parsed = jobEvent.safeParse(message.json());
    } catch {
      parsed = jobEvent.safeParse(undefined);
    }
    if (!parsed.success) {
      // Redelivering a malformed event can never help; terminate it.
      logger.error({ subject: message.subject, seq: message.seq }, 'invalid job event dropped');
      message.term('invalid job event');
      return;
    }
    let decision: 'ack' | 'retry';
    try {
      decision = await scheduleEvent(parsed.data);
    } catch (error) {
      logger.error({ err: error, jobId: parsed.data.jobId }, 'could not schedule webhook');
      decision = 'retry';
    }
    if (decision === 'ack') await message.ackAck().catch(() => message.ack());
    else message.nak(unavailableRetryMs);
  }

  const consumerDefinition = topology.consumers.webhook;
  const consumer = await jetstream(nats).consumers.get(
    consumerDefinition.stream,
    consumerDefinition.durableName,
  );
  const messages: ConsumerMessages = await consumer.consume({ max_messages: 64 });
  const consuming = (async () => {
    for await (const message of messages) {
      await handleMessage(message);
    }
  })().catch((error: unknown) => logger.error({ err: error }, 'event consumer stopped'));

  // ---- Scheduler: claim due sequences and attempt them ----------------------------------------

  const inFlight = new Set<Promise<void>>();
  let timer: NodeJS.Timeout | undefined;
  let ticking: Promise<void> = Promise.resolve();

  async function attempt(delivery: DeliveryDocument, claimId: string): Promise<void> {
    const log = logger.child({ jobId: delivery.jobId, event: delivery.event });
    const attemptNumber = delivery.attempts + 1;
    // Read for every attempt, never cached: an attempt that starts after a rotation returned
    // is signed with the new secret (and, during its grace period, the replaced one as well).
    let secrets: { secret: string; previousSecrets: string[] };
    try {
      const account = await accountOf(delivery.accountId);
      secrets = {
        secret: account.webhookSecret,
        previousSecrets:
          account.previousWebhookSecret === null ? [] : [account.previousWebhookSecret.secret],
      };
    } catch (error) {
      if (error instanceof ServiceError && isGone(error)) {
        await finish(delivery, claimId, attemptNumber, {
          attemptedAt: now(),
          outcome: 'refused',
          latencyMs: null,
          error: 'the account no longer exists; nothing was sent',
        });
        return;
      }
      // Not the receiver's fault: no attempt is counted, the sequence is due again shortly.
      log.warn({ err: error }, 'billing unavailable; webhook attempt postponed');
      await store.release(delivery._id, claimId, new Date(clock() + unavailableRetryMs), now());
      return;
    }
    const attemptedAt = now();
    const deliveryId = `dlv_${randomUUID()}`;
    let headers: Record<string, string>;
    try {
      headers = {
        'Content-Type': 'application/json',
        'User-Agent': USER_AGENT,
        'X-Service-Event': delivery.event,
        'X-Service-Delivery': deliveryId,
        ...signDelivery({
          ...secrets,
          body: delivery.body,
          timestamp: Math.floor(attemptedAt.getTime() / 1000),
          webhookId: delivery.webhookId,
        }),
      };
    } catch (error) {
      await finish(delivery, claimId, attemptNumber, {
        attemptedAt,
        deliveryId,
        outcome: 'failed',
        latencyMs: null,
        error: `could not sign the delivery: ${(error as Error).message}`,
      });
      return;
    }
    const result = await deliverWebhook({
      url: delivery.target,
      body: Buffer.from(delivery.body, 'utf8'),
      headers,
      policy,
      timeoutMs,
      ...(options.resolveHostname ? { resolveHostname: options.resolveHostname } : {}),
    });
    attemptDuration.observe(result.latencyMs / 1000);
    await finish(delivery, claimId, attemptNumber, {
      attemptedAt,
      deliveryId,
      outcome: result.outcome,
      statusCode: result.statusCode ?? null,
      latencyMs: result.latencyMs,
      error: result.error ?? null,
      retryAfter: result.retryAfter,
    });
  }

  async function finish(
    delivery: DeliveryDocument,
    claimId: string,
    attemptNumber: number,
    result: {
      attemptedAt: Date;
      deliveryId?: string;
      outcome: 'delivered' | 'failed' | 'refused';
      statusCode?: number | null;
      latencyMs: number | null;
      error: string | null;
      retryAfter?: string | undefined;
    },
  ): Promise<void> {
    const finishedAt = clock();
    const step = nextStep(
      attemptNumber,
      { outcome: result.outcome, retryAfter: result.retryAfter },
      schedule,
      finishedAt,
      random,
    );
    // The record first: an attempt that happened is never lost, even if the update below is.
    await store.recordAttempt({
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
      instance,
    });
    const kept = await store.finishAttempt(delivery._id, claimId, {
      attempts: attemptNumber,
      status: step.status,
      nextAttemptAt: step.nextAttemptAt === null ? null : new Date(step.nextAttemptAt),
      lastOutcome: result.outcome,
      lastError: result.error,
      now: new Date(finishedAt),
    });
    const metricOutcome =
      result.outcome === 'failed' && step.status === 'exhausted' ? 'exhausted' : result.outcome;
    deliveriesTotal.inc({ outcome: metricOutcome });
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
    if (result.outcome === 'delivered') logger.info(fields, 'webhook delivered');
    else logger.warn({ ...fields, error: result.error }, 'webhook attempt did not succeed');
  }

  async function tick(): Promise<void> {
    const current = now();
    const recovered = await store.recoverExpiredLeases(current);
    if (recovered > 0) logger.warn({ recovered }, 'took over webhook attempts whose lease expired');
    while (!stopped && inFlight.size < maxConcurrent) {
      const claimId = randomUUID();
      const claimedAt = now();
      const delivery = await store.claimDue(
        claimedAt,
        new Date(claimedAt.getTime() + leaseMs),
        claimId,
      );
      if (delivery === null) break;
      const running: Promise<void> = attempt(delivery, claimId)
        .catch((error: unknown) => {
          // The lease brings the sequence back if its state could not be written.
          logger.error({ err: error, deliveryId: delivery._id }, 'webhook attempt crashed');
        })
        .finally(() => inFlight.delete(running));
      inFlight.add(running);
    }
  }

  function loop(): void {
    if (stopped) return;
    ticking = tick()
      .catch((error: unknown) => logger.error({ err: error }, 'webhook scheduler tick failed'))
      .finally(() => {
        if (!stopped) timer = setTimeout(loop, pollIntervalMs);
      });
  }
  loop();

  // ---- Endpoints ------------------------------------------------------------------------------

  const subscriptions: Subscription[] = [
    rpc.serve(webhookEndpoints.listDeliveries, async ({ jobId }) => {
      const attempts = await store.listAttempts(jobId);
      return {
        deliveries: attempts.map((attempt) => ({
          deliveryId: attempt._id,
          jobId: attempt.jobId,
          event: attempt.event,
          attempt: attempt.attempt,
          attemptedAt: attempt.attemptedAt.toISOString(),
          target: attempt.target,
          statusCode: attempt.statusCode,
          latencyMs: attempt.latencyMs,
          outcome: attempt.outcome,
          error: attempt.error,
        })),
      };
    }),
    rpc.serve(webhookEndpoints.redeliver, async ({ jobId, event }) => {
      const reset = await store.redeliver(jobId, event, now());
      if (reset > 0) logger.info({ jobId, event, reset }, 'webhook redelivery scheduled');
      return { scheduled: reset > 0 };
    }),
  ];
  await nats.flush();
  logger.info({ instance, schedule, timeoutMs, policy }, 'webhook service started');

  return {
    async stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      for (const subscription of subscriptions) subscription.unsubscribe();
      await messages.close().catch(() => {});
      await consuming;
      await ticking;
      await Promise.allSettled([...inFlight]);
    },
  };
}

function isGone(error: ServiceError): boolean {
  return error.code === 'NOT_FOUND';
}
