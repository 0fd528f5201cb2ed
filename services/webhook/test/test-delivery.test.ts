import { LOCAL_DEVELOPMENT_POLICY, newWebhookSecret, webhookEndpoints } from '@tamp/proto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertStaysTrue } from '../../../test/support/stays-true';
import { verifyTampDelivery } from '../examples/verify-delivery';
import { ATTEMPTS, type AttemptDocument } from '../src/adapters/attempt-repository';
import { DELIVERIES, type DeliveryDocument } from '../src/adapters/delivery-repository';
import { buildPayload, deliveryKey } from '../src/domain/payload';
import { receiverPool, watchConnectionAttempts } from './support/loopback-receiver';
import { expectRejected, expectVerified, stringHeaders } from './support/signatures';
import { account, completedEvent, failedEvent, type Slice, startSlice } from './support/slice';

/** Short enough that a retry, had one been scheduled, would arrive within the waits below. */
const FAST_SCHEDULE = [50, 50, 50, 50, 50];
const TIMEOUT_MS = 300;

const receivers = receiverPool();
afterAll(() => receivers.closeAll());

describe('test deliveries (sendTestDelivery)', () => {
  let slice: Slice;

  beforeAll(async () => {
    slice = await startSlice({
      policy: LOCAL_DEVELOPMENT_POLICY,
      retryScheduleMs: FAST_SCHEDULE,
      timeoutMs: TIMEOUT_MS,
    });
    await slice.startService({ instanceId: 'main' });
  });
  afterAll(async () => {
    await slice?.close();
  });

  /** An account billing knows, with `webhookUrl` as its default. */
  function owner(webhookUrl: string | null, secret = newWebhookSecret()) {
    const created = account({ webhookSecret: secret, webhookUrl });
    slice.accounts.set(created.accountId, created);
    return created;
  }

  /** A finished job of `accountId` the job service double answers for. */
  function finishedJob(event: ReturnType<typeof completedEvent>) {
    slice.jobEvents.set(event.jobId, event);
    return event;
  }

  const send = (accountId: string, jobId: string) =>
    slice.rpc.call(webhookEndpoints.sendTestDelivery, { accountId, jobId }, { timeoutMs: 10_000 });
  const listed = async (jobId: string) =>
    (await slice.rpc.call(webhookEndpoints.listDeliveries, { jobId })).deliveries;
  const sequences = (jobId: string) =>
    slice.db.collection<DeliveryDocument>(DELIVERIES).countDocuments({ jobId });

  it("sends the job's event once to the current default URL, signed with the current secrets, and logs it", async () => {
    const target = await receivers.start();
    const original = newWebhookSecret();
    const customer = owner(`${target.origin}/default`, original);
    // The job's own URL is not the test delivery's target: the account default is.
    const event = finishedJob(completedEvent(customer.accountId, 'https://example.com/job-hook'));

    const answer = await send(customer.accountId, event.jobId);
    expect(answer).toEqual({
      outcome: 'delivered',
      target: `${target.origin}/default`,
      statusCode: 200,
      latencyMs: expect.any(Number),
      error: null,
    });
    expect(target.requests).toHaveLength(1);
    const request = target.requests[0]!;
    expect(request.url).toBe('/default');
    expect(request.headers['x-service-event']).toBe('job.completed');
    expect(request.headers['x-service-delivery']).toMatch(/^dlv_/);
    expect(request.headers['webhook-id']).toBe(`msg_${event.jobId}_job.completed`);
    expect(JSON.parse(request.body.toString('utf8'))).toEqual(buildPayload(event));
    expectVerified(request, original);

    const logged = await listed(event.jobId);
    expect(logged).toEqual([
      {
        deliveryId: request.headers['x-service-delivery'],
        jobId: event.jobId,
        event: 'job.completed',
        attempt: 1,
        attemptedAt: expect.any(String),
        target: `${target.origin}/default`,
        statusCode: 200,
        latencyMs: answer.latencyMs,
        outcome: 'delivered',
        error: null,
      },
    ]);
    // Marked as a test delivery in the log, outside any sequence; no sequence was made.
    expect(
      await slice.db.collection<AttemptDocument>(ATTEMPTS).findOne({ jobId: event.jobId }),
    ).toMatchObject({
      test: true,
      sequence: 0,
      instance: 'main',
    });
    expect(await sequences(event.jobId)).toBe(0);

    // A rotation and a new default URL apply to the very next test delivery: nothing is cached.
    const moved = await receivers.start();
    const rotated = newWebhookSecret();
    slice.accounts.set(customer.accountId, {
      ...customer,
      webhookUrl: moved.origin,
      webhookSecret: rotated,
      previousWebhookSecret: {
        secret: original,
        validUntil: new Date(Date.now() + 60_000).toISOString(),
      },
    });
    expect((await send(customer.accountId, event.jobId)).outcome).toBe('delivered');
    expect(target.requests).toHaveLength(1);
    expect(moved.requests).toHaveLength(1);
    const resent = moved.requests[0]!;
    expectVerified(resent, rotated);
    expect(verifyTampDelivery(resent.body, resent.headers, original)).toMatchObject({ ok: false });
    expect(new Webhook(original).verify(resent.body, stringHeaders(resent.headers))).toEqual(
      buildPayload(event),
    );
    expectRejected(resent, newWebhookSecret());
    expect((await listed(event.jobId)).map((attempt) => attempt.target)).toEqual([
      `${target.origin}/default`,
      moved.origin,
    ]);
  });

  it('answers failed with the status of a receiver answering 500, and retries nothing', async () => {
    const target = await receivers.start(() => 500);
    const customer = owner(target.origin);
    const event = finishedJob(failedEvent(customer.accountId, null));

    expect(await send(customer.accountId, event.jobId)).toEqual({
      outcome: 'failed',
      target: target.origin,
      statusCode: 500,
      latencyMs: expect.any(Number),
      error: 'receiver answered 500',
    });
    // No retry may follow: 400 ms is eight retry delays of FAST_SCHEDULE.
    await assertStaysTrue(() => expect(target.requests).toHaveLength(1), {
      forMs: 400,
      what: 'no retry of a test delivery',
    });
    expect(target.requests[0]?.headers['x-service-event']).toBe('job.failed');
    expect(JSON.parse(target.requests[0]!.body.toString('utf8'))).toEqual(buildPayload(event));
    expect(await sequences(event.jobId)).toBe(0);
    expect(
      (await listed(event.jobId)).map((attempt) => [attempt.outcome, attempt.statusCode]),
    ).toEqual([['failed', 500]]);
  });

  it('gives up at the deadline of any attempt', async () => {
    const target = await receivers.start(() => null);
    const customer = owner(target.origin);
    const event = finishedJob(completedEvent(customer.accountId, null));

    const answer = await send(customer.accountId, event.jobId);
    expect(answer).toMatchObject({ outcome: 'failed', statusCode: null });
    expect(answer.error).toMatch(new RegExp(`${TIMEOUT_MS} ms deadline`));
    expect(answer.latencyMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    // No retry may follow the deadline either: eight retry delays of FAST_SCHEDULE.
    await assertStaysTrue(() => expect(target.requests).toHaveLength(1), {
      forMs: 400,
      what: 'no retry after the deadline',
    });
  });

  it("leaves the job's own delivery sequence as it was", async () => {
    const own = await receivers.start();
    const fallback = await receivers.start();
    const customer = owner(fallback.origin);
    const event = finishedJob(completedEvent(customer.accountId, own.origin));
    await slice.publish(event);
    const key = deliveryKey(event.jobId, event.event);
    await expect
      .poll(async () => (await slice.deliveries.find(key))?.status, { timeout: 15_000 })
      .toBe('delivered');
    const before = await slice.deliveries.find(key);

    expect((await send(customer.accountId, event.jobId)).outcome).toBe('delivered');
    // The sequence must not move: 200 ms (four retry delays) in which a change would show.
    await assertStaysTrue(
      async () => {
        expect(await slice.deliveries.find(key)).toEqual(before);
        expect(own.requests).toHaveLength(1);
      },
      { forMs: 200, intervalMs: 40, what: "the job's own sequence left as it was" },
    );
    expect(fallback.requests).toHaveLength(1);
    expect((await listed(event.jobId)).map((attempt) => [attempt.attempt, attempt.target])).toEqual(
      [
        [1, own.origin],
        [1, fallback.origin],
      ],
    );
  });

  it("sends an inline job's event too, though its sequence never delivers", async () => {
    const target = await receivers.start();
    const customer = owner(target.origin);
    const event = finishedJob(completedEvent(customer.accountId, null, { inline: true }));
    expect((await send(customer.accountId, event.jobId)).outcome).toBe('delivered');
    expect(JSON.parse(target.requests[0]!.body.toString('utf8'))).toEqual(buildPayload(event));
  });

  it('answers no-target when the account has no default URL, whatever the job', async () => {
    const customer = owner(null);
    const event = finishedJob(completedEvent(customer.accountId, 'https://example.com/job-hook'));
    const noTarget = {
      outcome: 'no-target',
      target: null,
      statusCode: null,
      latencyMs: null,
      error: null,
    };
    expect(await send(customer.accountId, event.jobId)).toEqual(noTarget);
    expect(await send(customer.accountId, 'job_unknown')).toEqual(noTarget);
    expect(await send('acct_unknown', event.jobId)).toEqual(noTarget);
    expect(await listed(event.jobId)).toEqual([]);
  });

  it('answers refused for a target the policy refuses, without a connection', async () => {
    const watch = watchConnectionAttempts();
    for (const target of ['http://10.0.0.1/hook', 'http://169.254.169.254/latest/meta-data']) {
      const customer = owner(target);
      const event = finishedJob(completedEvent(customer.accountId, null));
      const answer = await send(customer.accountId, event.jobId);
      expect(answer, target).toMatchObject({ outcome: 'refused', target, statusCode: null });
      expect(answer.error, target).toBeTruthy();
      expect((await listed(event.jobId)).map((attempt) => attempt.outcome)).toEqual(['refused']);
      expect(await sequences(event.jobId)).toBe(0);
    }
    watch.stop();
    expect(watch.sockets()).toBe(0);
  });

  it("passes on the job service's JOB_NOT_FOUND and sends nothing", async () => {
    const target = await receivers.start();
    const customer = owner(target.origin);
    const stranger = owner(target.origin);
    const theirs = finishedJob(completedEvent(stranger.accountId, null));
    for (const jobId of [theirs.jobId, 'job_unknown']) {
      await expect(send(customer.accountId, jobId)).rejects.toMatchObject({
        code: 'JOB_NOT_FOUND',
      });
    }
    expect(target.requests).toHaveLength(0);
    expect(await listed(theirs.jobId)).toEqual([]);
  });
});
