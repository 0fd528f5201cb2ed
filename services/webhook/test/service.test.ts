import {
  LOCAL_DEVELOPMENT_POLICY,
  newWebhookSecret,
  PRODUCTION_POLICY,
  webhookEndpoints,
} from '@tamp/proto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertStaysTrue } from '../../../test/support/stays-true';
import { verifyTampDelivery } from '../examples/verify-delivery';
import { ATTEMPTS } from '../src/adapters/attempt-repository';
import { DELIVERIES, type DeliveryDocument } from '../src/adapters/delivery-repository';
import { deliveryKey } from '../src/domain/payload';
import {
  type RecordedRequest,
  receiverPool,
  watchConnectionAttempts,
} from './support/loopback-receiver';
import { expectRejected, expectVerified, stringHeaders } from './support/signatures';
import {
  type AccountView,
  account,
  completedEvent,
  failedEvent,
  type Slice,
  startSlice,
  waitFor,
} from './support/slice';

const FAST_SCHEDULE = [50, 50, 50, 50, 50];

const receivers = receiverPool();
const receiver = receivers.start;
afterAll(() => receivers.closeAll());

describe('webhook service (local development policy, fast schedule)', () => {
  let slice: Slice;
  let owner: AccountView;
  const secret = newWebhookSecret();

  beforeAll(async () => {
    slice = await startSlice({
      policy: LOCAL_DEVELOPMENT_POLICY,
      retryScheduleMs: FAST_SCHEDULE,
      timeoutMs: 300,
    });
    owner = account({ webhookSecret: secret });
    slice.accounts.set(owner.accountId, owner);
    await slice.startService({ instanceId: 'main', settings: { unavailableRetryMs: 50 } });
  });
  afterAll(async () => {
    await slice?.close();
  });

  async function delivery(jobId: string, event: 'job.completed' | 'job.failed') {
    return slice.deliveries.find(deliveryKey(jobId, event));
  }

  it('delivers a completed job with the spec payload, headers and signatures', async () => {
    const target = await receiver();
    const event = completedEvent(owner.accountId, `${target.origin}/hooks?source=tamp`);
    await slice.publish(event);

    await waitFor(() => target.requests.length === 1, 'the delivery');
    const [request] = target.requests;
    if (request === undefined) throw new Error('no request');
    expect(request.method).toBe('POST');
    expect(request.url).toBe('/hooks?source=tamp');
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.headers['x-service-event']).toBe('job.completed');
    expect(request.headers['x-service-timestamp']).toMatch(/^\d+$/);
    expect(request.headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(request.headers['x-service-delivery']).toMatch(/^dlv_/);
    expect(request.headers['webhook-id']).toBe(`msg_${event.jobId}_job.completed`);
    expect(request.headers['webhook-timestamp']).toBe(request.headers['x-service-timestamp']);
    expect(JSON.parse(request.body.toString('utf8'))).toEqual({
      event: 'job.completed',
      job: {
        id: event.jobId,
        type: 'image',
        status: 'completed',
        result: {
          outputKey: `results/${owner.accountId}/${event.jobId}/result.webp`,
          metrics: { inputSize: 2_000_000, outputSize: 500_000, compressionRatio: 4 },
        },
        error: null,
        createdAt: '2026-11-21T12:00:00.000Z',
        completedAt: '2026-11-21T12:00:03.250Z',
      },
    });
    expectVerified(request, secret);

    await waitFor(
      async () => (await delivery(event.jobId, 'job.completed'))?.status === 'delivered',
      'the sequence to be marked delivered',
    );
    const listed = await slice.rpc.call(webhookEndpoints.listDeliveries, { jobId: event.jobId });
    expect(listed.deliveries).toEqual([
      expect.objectContaining({
        deliveryId: request.headers['x-service-delivery'],
        jobId: event.jobId,
        event: 'job.completed',
        attempt: 1,
        target: `${target.origin}/hooks?source=tamp`,
        statusCode: 200,
        outcome: 'delivered',
        error: null,
      }),
    ]);
  });

  it('delivers a failed job with result null and the error text', async () => {
    const target = await receiver();
    const event = failedEvent(owner.accountId, target.origin);
    await slice.publish(event);
    await waitFor(() => target.requests.length === 1, 'the delivery');
    const request = target.requests[0]!;
    expect(request.headers['x-service-event']).toBe('job.failed');
    expect(JSON.parse(request.body.toString('utf8'))).toEqual({
      event: 'job.failed',
      job: {
        id: event.jobId,
        type: 'audio',
        status: 'failed',
        result: null,
        error: 'ffmpeg could not decode the input',
        createdAt: event.createdAt,
        completedAt: event.completedAt,
      },
    });
    expectVerified(request, secret);
  });

  it('retries a receiver that fails 3 times: exactly 4 attempts, one success, same body and id', async () => {
    const target = await receiver((count) => (count <= 3 ? 500 : 204));
    const event = completedEvent(owner.accountId, target.origin);
    await slice.publish(event);

    await waitFor(
      async () => (await delivery(event.jobId, 'job.completed'))?.status === 'delivered',
      'the sequence to be delivered',
    );
    // Nothing may arrive after the success: 300 ms is six retry delays of FAST_SCHEDULE.
    await assertStaysTrue(() => expect(target.requests).toHaveLength(4), {
      forMs: 300,
      what: 'no 5th request',
    });
    for (const request of target.requests) expectVerified(request, secret);
    const bodies = new Set(target.requests.map((request) => request.body.toString('hex')));
    expect(bodies.size).toBe(1);
    expect(new Set(target.requests.map((r) => r.headers['webhook-id'])).size).toBe(1);
    expect(new Set(target.requests.map((r) => r.headers['x-service-delivery'])).size).toBe(4);

    const { deliveries } = await slice.rpc.call(webhookEndpoints.listDeliveries, {
      jobId: event.jobId,
    });
    expect(deliveries.map((d) => [d.attempt, d.outcome, d.statusCode])).toEqual([
      [1, 'failed', 500],
      [2, 'failed', 500],
      [3, 'failed', 500],
      [4, 'delivered', 204],
    ]);
    expect(deliveries[0]?.error).toBe('receiver answered 500');
  });

  it('gives a receiver that never answers 1 + 5 attempts, then nothing more', async () => {
    const target = await receiver(() => null);
    const event = completedEvent(owner.accountId, target.origin);
    await slice.publish(event);

    await waitFor(
      async () => (await delivery(event.jobId, 'job.completed'))?.status === 'exhausted',
      'the sequence to be exhausted',
      30_000,
    );
    // Nothing may follow the exhaustion: 500 ms is ten retry delays of FAST_SCHEDULE.
    await assertStaysTrue(() => expect(target.requests).toHaveLength(6), {
      forMs: 500,
      what: 'no 7th request',
    });
    const { deliveries } = await slice.rpc.call(webhookEndpoints.listDeliveries, {
      jobId: event.jobId,
    });
    expect(deliveries).toHaveLength(6);
    expect(deliveries.map((d) => d.attempt)).toEqual([1, 2, 3, 4, 5, 6]);
    for (const attempt of deliveries) {
      expect(attempt.outcome).toBe('failed');
      expect(attempt.statusCode).toBeNull();
      expect(attempt.error).toMatch(/deadline/);
    }
    expect((await delivery(event.jobId, 'job.completed'))?.attempts).toBe(6);
  });

  it('sends nothing for inline jobs, even with a webhook URL', async () => {
    const inlineTarget = await receiver();
    const marker = await receiver();
    const inline = completedEvent(owner.accountId, inlineTarget.origin, { inline: true });
    await slice.publish(inline);
    // Events are consumed in order: once the next one is delivered, the inline one was handled.
    await slice.publish(completedEvent(owner.accountId, marker.origin));
    await waitFor(() => marker.requests.length === 1, 'the marker delivery');
    // The inline event was handled before the marker's; 100 ms (two retry delays) more in which
    // a late connection for it would show.
    await assertStaysTrue(() => expect(inlineTarget.connectionCount()).toBe(0), {
      forMs: 100,
      what: 'no connection for the inline job',
    });
    expect(await delivery(inline.jobId, 'job.completed')).toBeNull();
  });

  it('keeps one sequence when the same event arrives twice', async () => {
    const target = await receiver();
    const marker = await receiver();
    const event = completedEvent(owner.accountId, target.origin);
    // Different message ids so the stream stores both copies (a publisher retry past the window).
    await slice.publish(event, 'copy-1');
    await slice.publish(event, 'copy-2');
    await slice.publish(completedEvent(owner.accountId, marker.origin));
    await waitFor(() => marker.requests.length === 1, 'the marker delivery');
    await waitFor(
      async () => (await delivery(event.jobId, 'job.completed'))?.status === 'delivered',
      'the sequence to be delivered',
    );
    // The second copy was consumed before the marker; 200 ms (four retry delays) more in which
    // a second delivery of it would show.
    await assertStaysTrue(() => expect(target.requests).toHaveLength(1), {
      forMs: 200,
      what: 'no second delivery',
    });
    const stored = await slice.db
      .collection<DeliveryDocument>(DELIVERIES)
      .countDocuments({ jobId: event.jobId });
    expect(stored).toBe(1);
  });

  it("uses the account's default URL when the job has none, and nothing when neither has one", async () => {
    const target = await receiver();
    const withDefault = account({
      webhookSecret: newWebhookSecret(),
      webhookUrl: `${target.origin}/default`,
    });
    slice.accounts.set(withDefault.accountId, withDefault);
    const event = completedEvent(withDefault.accountId, null);
    await slice.publish(event);
    await waitFor(() => target.requests.length === 1, 'the delivery to the account default');
    expect(target.requests[0]?.url).toBe('/default');
    expectVerified(target.requests[0]!, withDefault.webhookSecret);

    const silent = completedEvent(owner.accountId, null); // owner has no default URL
    const marker = await receiver();
    await slice.publish(silent);
    await slice.publish(completedEvent(owner.accountId, marker.origin));
    await waitFor(() => marker.requests.length === 1, 'the marker delivery');
    expect(await delivery(silent.jobId, 'job.completed')).toBeNull();
  });

  it("asks billing for an account's default URL once, until billing says the account changed", async () => {
    const target = await receiver();
    const quiet = account({ webhookSecret: newWebhookSecret() }); // no default URL yet
    slice.accounts.set(quiet.accountId, quiet);
    const first = completedEvent(quiet.accountId, null);
    const second = completedEvent(quiet.accountId, null);
    await slice.publish(first);
    await slice.publish(second);
    const marker = await receiver();
    await slice.publish(completedEvent(owner.accountId, marker.origin));
    await waitFor(() => marker.requests.length === 1, 'the marker delivery');
    expect(slice.accountReads.get(quiet.accountId)).toBe(1);
    expect(await delivery(second.jobId, 'job.completed')).toBeNull();

    // The customer sets a default URL: billing stores it, then notifies.
    slice.accounts.set(quiet.accountId, { ...quiet, webhookUrl: `${target.origin}/new-default` });
    await slice.notifyAccountChanged(quiet.accountId);
    await slice.publish(completedEvent(quiet.accountId, null));
    await waitFor(() => target.requests.length === 1, 'the delivery to the new default');
    expect(target.requests[0]?.url).toBe('/new-default');
  });

  it('waits out a billing outage without spending attempts, and refuses for a vanished account', async () => {
    const target = await receiver();
    const flaky = account({
      webhookSecret: newWebhookSecret(),
      webhookUrl: `${target.origin}/default`,
    });
    slice.accounts.set(flaky.accountId, flaky);
    // Two failures while scheduling (default URL lookup), then two while signing the attempt.
    slice.billingOutages.set(flaky.accountId, 4);
    const event = completedEvent(flaky.accountId, null);
    await slice.publish(event);
    await waitFor(
      async () => (await delivery(event.jobId, 'job.completed'))?.status === 'delivered',
      'the delivery after the outage',
    );
    expect(slice.billingOutages.get(flaky.accountId)).toBe(0);
    expect(target.requests).toHaveLength(1);
    expectVerified(target.requests[0]!, flaky.webhookSecret);
    const { deliveries } = await slice.rpc.call(webhookEndpoints.listDeliveries, {
      jobId: event.jobId,
    });
    expect(deliveries.map((d) => [d.attempt, d.outcome])).toEqual([[1, 'delivered']]);

    const orphan = completedEvent('acct_gone', target.origin);
    await slice.publish(orphan);
    await waitFor(
      async () => (await delivery(orphan.jobId, 'job.completed'))?.status === 'refused',
      'the refusal for a vanished account',
    );
    expect(target.requests).toHaveLength(1);
  });

  it('signs with the replaced secret too during its grace period, and never from a stale cache', async () => {
    const original = newWebhookSecret();
    const rotated = newWebhookSecret();
    const rotating = account({ webhookSecret: original });
    slice.accounts.set(rotating.accountId, rotating);
    const validUntil = new Date(Date.now() + 60_000).toISOString();
    // Billing's answers change between the attempts, as a rotation and then the end of its grace
    // period would change them: each attempt must sign with what billing says at that moment.
    const target = await receiver((count) => {
      if (count === 1) {
        slice.accounts.set(rotating.accountId, {
          ...rotating,
          webhookSecret: rotated,
          previousWebhookSecret: { secret: original, validUntil },
        });
      }
      if (count === 2)
        slice.accounts.set(rotating.accountId, { ...rotating, webhookSecret: rotated });
      return count < 3 ? 500 : 200;
    });
    await slice.publish(completedEvent(rotating.accountId, target.origin));
    await waitFor(() => target.requests.length === 3, 'three attempts');
    const [before, during, after] = target.requests as [
      RecordedRequest,
      RecordedRequest,
      RecordedRequest,
    ];

    expectVerified(before, original);
    expectRejected(before, rotated);

    // X-Service-Signature stays the spec's single value, keyed with the new secret; the
    // Standard Webhooks header lists both, so its verifiers accept either secret.
    expect(during.headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(during.headers['webhook-signature']).toMatch(/^v1,\S+ v1,\S+$/);
    expectVerified(during, rotated);
    expect(verifyTampDelivery(during.body, during.headers, original)).toMatchObject({ ok: false });
    expect(new Webhook(original).verify(during.body, stringHeaders(during.headers))).toEqual(
      JSON.parse(during.body.toString('utf8')),
    );
    expectRejected(during, newWebhookSecret());

    expect(after.headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expectVerified(after, rotated);
    expectRejected(after, original);
  });

  it('redelivers on request: a new sequence, same webhook-id, old attempts kept', async () => {
    const target = await receiver();
    const event = completedEvent(owner.accountId, target.origin);
    await slice.publish(event);
    await waitFor(
      async () => (await delivery(event.jobId, 'job.completed'))?.status === 'delivered',
      'the first sequence',
    );

    const answer = await slice.rpc.call(webhookEndpoints.redeliver, { jobId: event.jobId });
    expect(answer).toEqual({ scheduled: true });
    await waitFor(async () => {
      const stored = await delivery(event.jobId, 'job.completed');
      return stored?.sequence === 2 && stored.status === 'delivered';
    }, 'the second sequence');
    expect(target.requests).toHaveLength(2);
    expect(target.requests[0]?.headers['webhook-id']).toBe(
      target.requests[1]?.headers['webhook-id'],
    );
    expect(target.requests[0]?.body.equals(target.requests[1]!.body)).toBe(true);
    for (const request of target.requests) expectVerified(request, secret);

    const { deliveries } = await slice.rpc.call(webhookEndpoints.listDeliveries, {
      jobId: event.jobId,
    });
    expect(deliveries.map((d) => [d.attempt, d.outcome])).toEqual([
      [1, 'delivered'],
      [1, 'delivered'],
    ]);
    expect(Date.parse(deliveries[0]!.attemptedAt)).toBeLessThanOrEqual(
      Date.parse(deliveries[1]!.attemptedAt),
    );

    expect(
      await slice.rpc.call(webhookEndpoints.redeliver, {
        jobId: event.jobId,
        event: 'job.failed',
      }),
    ).toEqual({ scheduled: false });
    expect(await slice.rpc.call(webhookEndpoints.redeliver, { jobId: 'job_unknown' })).toEqual({
      scheduled: false,
    });
    expect(await slice.rpc.call(webhookEndpoints.listDeliveries, { jobId: 'job_unknown' })).toEqual(
      { deliveries: [] },
    );
    // A string the database cannot hold is just as unknown, not a failure.
    const unstorable = 'job_\u0000';
    expect(await slice.rpc.call(webhookEndpoints.listDeliveries, { jobId: unstorable })).toEqual({
      deliveries: [],
    });
    expect(await slice.rpc.call(webhookEndpoints.redeliver, { jobId: unstorable })).toEqual({
      scheduled: false,
    });
  });
});

describe('webhook service (production policy)', () => {
  let slice: Slice;
  let owner: AccountView;
  let metricsText: () => Promise<string>;

  beforeAll(async () => {
    slice = await startSlice({ policy: PRODUCTION_POLICY, retryScheduleMs: FAST_SCHEDULE });
    owner = account({ webhookSecret: newWebhookSecret() });
    slice.accounts.set(owner.accountId, owner);
    const { metrics } = await slice.startService();
    metricsText = () => metrics.metrics();
  });
  afterAll(async () => {
    await slice?.close();
  });

  it('records refused targets once, without retries and without a connection', async () => {
    const local = await receiver();
    const targets = [
      'http://10.0.0.1/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://[fd00::1]/hook',
      `http://127.0.0.1:${local.port}/hook`,
      // https, so the address rule (not only the scheme rule) is what refuses them
      'https://10.0.0.1/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://[fd00::1]/hook',
      `https://127.0.0.1:${local.port}/hook`,
      // a name that resolves to loopback is refused at connect time, before any socket
      `https://localhost:${local.port}/hook`,
    ];
    const events = targets.map((target) => completedEvent(owner.accountId, target));
    const watch = watchConnectionAttempts();
    for (const event of events) await slice.publish(event);

    for (const event of events) {
      await waitFor(
        async () =>
          (await slice.deliveries.find(deliveryKey(event.jobId, event.event)))?.status ===
          'refused',
        `the refusal of ${event.webhookUrl}`,
      );
    }
    // No retry may follow a refusal: 300 ms is six retry delays of FAST_SCHEDULE, in which one
    // would add an attempt or open a connection.
    const jobIds = events.map((event) => event.jobId);
    await assertStaysTrue(
      async () => {
        expect(local.connectionCount()).toBe(0);
        expect(await slice.db.collection(ATTEMPTS).countDocuments({ jobId: { $in: jobIds } })).toBe(
          events.length,
        );
      },
      { forMs: 300, intervalMs: 50, what: 'no retry of a refused target' },
    );
    for (const [index, event] of events.entries()) {
      const { deliveries } = await slice.rpc.call(webhookEndpoints.listDeliveries, {
        jobId: event.jobId,
      });
      expect(deliveries, targets[index]).toHaveLength(1);
      expect(deliveries[0]).toMatchObject({
        attempt: 1,
        outcome: 'refused',
        statusCode: null,
        target: targets[index],
      });
      expect(deliveries[0]?.error).toBeTruthy();
    }
    expect(local.connectionCount()).toBe(0);
    watch.stop();
    expect(watch.sockets()).toBe(0);
    const text = await metricsText();
    expect(text).toMatch(/tamp_webhook_deliveries_total\{outcome="refused"\} 9/);
    expect(text).toMatch(/tamp_webhook_retries_pending 0/);
    expect(text).toMatch(/tamp_webhook_attempt_duration_seconds_count 9/);
  });
});

describe('webhook service restarts', () => {
  let slice: Slice;
  let owner: AccountView;

  beforeAll(async () => {
    // Long enough that the first instance is stopped well inside the backoff.
    slice = await startSlice({
      policy: LOCAL_DEVELOPMENT_POLICY,
      retryScheduleMs: [2_000, 50, 50, 50, 50],
    });
    owner = account({ webhookSecret: newWebhookSecret() });
    slice.accounts.set(owner.accountId, owner);
  });
  afterAll(async () => {
    await slice?.close();
  });

  it('delivers a retry scheduled by an instance that was stopped during the backoff', async () => {
    const target = await receiver((count) => (count === 1 ? 503 : 200));
    const first = await slice.startService({ instanceId: 'first' });
    const event = completedEvent(owner.accountId, target.origin);
    await slice.publish(event);
    const key = deliveryKey(event.jobId, event.event);
    await waitFor(
      async () => (await slice.deliveries.find(key))?.attempts === 1,
      'the first attempt',
    );
    await first.service.stop();
    expect((await slice.deliveries.find(key))?.status).toBe('scheduled');
    expect(target.requests).toHaveLength(1);

    const { metrics } = await slice.startService({ instanceId: 'second' });
    await waitFor(
      async () => (await slice.deliveries.find(key))?.status === 'delivered',
      'the retry',
    );
    expect(target.requests).toHaveLength(2);
    const attempts = await slice.attempts.listOfJob(event.jobId);
    expect(attempts.map((a) => [a.attempt, a.outcome, a.instance])).toEqual([
      [1, 'failed', 'first'],
      [2, 'delivered', 'second'],
    ]);
    expect(await metrics.metrics()).toMatch(
      /tamp_webhook_deliveries_total\{outcome="delivered"\} 1/,
    );
  });

  it('takes over an attempt whose instance died mid-delivery once its lease expires', async () => {
    const target = await receiver();
    const event = completedEvent(owner.accountId, target.origin);
    const key = deliveryKey(event.jobId, event.event);
    // What a crashed instance leaves behind: a claimed sequence whose lease has run out.
    const past = new Date(Date.now() - 60_000);
    await slice.db.collection<DeliveryDocument>(DELIVERIES).insertOne({
      _id: key,
      jobId: event.jobId,
      accountId: owner.accountId,
      event: event.event,
      target: target.origin,
      targetSource: 'job',
      body: '{"event":"job.completed"}',
      webhookId: `msg_${event.jobId}_job.completed`,
      sequence: 1,
      attempts: 0,
      status: 'delivering',
      nextAttemptAt: past,
      leaseUntil: past,
      claimId: 'crashed-instance-claim',
      lastOutcome: null,
      lastError: null,
      createdAt: past,
      updatedAt: past,
    });
    await waitFor(
      async () => (await slice.deliveries.find(key))?.status === 'delivered',
      'the takeover',
    );
    expect(target.requests).toHaveLength(1);
    expect(target.requests[0]?.body.toString()).toBe('{"event":"job.completed"}');
  });
});
