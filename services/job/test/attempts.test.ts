import { WRITE_BEHIND_LINGER_MS } from '@tamp/kit';
import { jobEndpoints, MB } from '@tamp/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordQueries } from '../../../test/support/query-plans';
import { IDEMPOTENCY_COLLECTION, JOBS_COLLECTION } from '../src/adapters/job-repository';
import { audioRequest, CONFIRMED, errorOf, imageRequest, JobHarness, newAccount } from './harness';

const harness = new JobHarness();
const accountId = newAccount();

beforeAll(() => {
  // The bottom of the jitter band: every retry waits half its nominal backoff (250 ms doubling).
  harness.random = () => 0;
  return harness.start({ retryBaseMs: 250 });
});
afterAll(() => harness.stop());

async function queuedAudioJob(extra: Parameters<typeof audioRequest>[2] = {}): Promise<string> {
  const uploadId = harness.addUpload(accountId, 'voice.mp3', 1 * MB, 'audio/mpeg');
  return (await harness.createJob(audioRequest(accountId, uploadId, extra))).job.id;
}

const begin = (jobId: string, attempt: number) => harness.beginAttempt(jobId, attempt);
const fail = (jobId: string, attempt: number, permanent = false) =>
  harness.rpc.call(jobEndpoints.failAttempt, {
    jobId,
    attempt,
    error: `boom ${attempt}`,
    permanent,
  });
const handBack = (jobId: string, attempt: number) =>
  harness.rpc.call(jobEndpoints.handBackAttempt, { jobId, attempt });
const complete = (jobId: string, attempt: number, outputKey: string | null = null) =>
  harness.completeAttempt(jobId, attempt, outputKey);
const stored = (jobId: string) => harness.storedJob(jobId);
const getJob = (jobId: string) => harness.rpc.call(jobEndpoints.getJob, { accountId, jobId });
const refundsOf = (jobId: string) => harness.refundCalls.filter((call) => call.jobId === jobId);

/** Collects `notify.job.<id>` messages. */
function notifications(jobId: string): unknown[] {
  const received: unknown[] = [];
  harness.peerNats.subscribe(harness.topology.subjects.jobNotification(jobId), {
    callback: (_error, message) => {
      received.push(message.json());
    },
  });
  return received;
}

describe('worker transitions', () => {
  it('runs created → pending → processing → completed once, with one event and a notification', async () => {
    const jobId = await queuedAudioJob();
    const notified = notifications(jobId);
    await harness.peerNats.flush();

    const started = await begin(jobId, 1);
    expect(started.action).toBe('run');
    expect(started.work).toMatchObject({
      jobId,
      pipeline: 'audio',
      input: { kind: 'upload', size: 1 * MB },
    });
    expect(await stored(jobId)).toMatchObject({ status: 'processing', attempts: 1 });
    expect((await getJob(jobId)).status).toBe('processing');
    expect((await begin(jobId, 1)).action).toBe('run');

    const key = `results/${accountId}/${jobId}/result.ogg`;
    await harness.store.putBuffer(key, Buffer.from('OggS audio'), 'audio/ogg');
    expect(await complete(jobId, 1, key)).toEqual({ accepted: true });
    expect(await complete(jobId, 1, key)).toEqual({ accepted: true });

    const job = await getJob(jobId);
    expect(job.status).toBe('completed');
    expect(job.result?.metrics).toEqual({
      inputSize: 1000,
      outputSize: 300,
      compressionRatio: 3.333,
      operationsApplied: ['encode'],
      processingMs: 40,
      durationSecIn: 3,
    });
    expect(job.result?.outputUrl).toContain('result.ogg');
    const events = await harness.eventsFor(jobId);
    expect(events).toHaveLength(1);
    expect(events[0]?.body).toMatchObject({
      event: 'job.completed',
      inline: false,
      result: { outputKey: key },
      usage: { audioSeconds: 3 },
    });
    await harness.peerNats.flush();
    await expect.poll(() => notified).toContainEqual({ jobId, status: 'completed' });
    expect(refundsOf(jobId)).toHaveLength(0);
  });

  it('skips a completed job on redelivery: never run, published or charged again', async () => {
    const jobId = await queuedAudioJob();
    await begin(jobId, 1);
    await complete(jobId, 1);
    expect(await begin(jobId, 2)).toEqual({ action: 'skip' });
    expect((await fail(jobId, 2)).status).toBe('failed');
    expect((await stored(jobId))?.status).toBe('completed');
    expect(await harness.eventsFor(jobId)).toHaveLength(1);
    expect(await harness.workFor(jobId)).toHaveLength(1);
    expect(harness.reserveCalls.filter((call) => call.jobId === jobId)).toHaveLength(1);
  });

  it('retries a failed attempt with exponential backoff, then completes without a refund', async () => {
    const jobId = await queuedAudioJob();
    await begin(jobId, 1);
    expect(await fail(jobId, 1)).toEqual({ status: 'pending', retryInMs: 125 });
    expect(await stored(jobId)).toMatchObject({
      status: 'pending',
      attempts: 1,
      lastError: 'boom 1',
    });
    // A repeated report of the same failure changes nothing.
    expect((await fail(jobId, 1)).status).toBe('pending');
    expect((await begin(jobId, 2)).action).toBe('run');
    expect(await fail(jobId, 2)).toEqual({ status: 'pending', retryInMs: 250 });
    expect((await begin(jobId, 3)).action).toBe('run');
    expect(await complete(jobId, 3)).toEqual({ accepted: true });
    expect((await getJob(jobId)).status).toBe('completed');
    expect(refundsOf(jobId)).toHaveLength(0);
    expect((await harness.eventsFor(jobId)).map((event) => event.body.event)).toEqual([
      'job.completed',
    ]);
  });

  it('fails after the 4th failed attempt: refunded once, exactly one job.failed event', async () => {
    const jobId = await queuedAudioJob();
    const notified = notifications(jobId);
    await harness.peerNats.flush();
    const outcomes = [];
    for (let attempt = 1; attempt <= 4; attempt++) {
      expect((await begin(jobId, attempt)).action).toBe('run');
      outcomes.push(await fail(jobId, attempt));
    }
    expect(outcomes.map((outcome) => outcome.status)).toEqual([
      'pending',
      'pending',
      'pending',
      'failed',
    ]);
    expect(outcomes.map((outcome) => outcome.retryInMs)).toEqual([125, 250, 500, 0]);
    // Late or repeated reports do not fail it twice.
    await fail(jobId, 4);
    expect(await begin(jobId, 5)).toEqual({ action: 'skip' });

    expect(await getJob(jobId)).toEqual({ id: jobId, status: 'failed', error: 'boom 4' });
    expect(refundsOf(jobId)).toHaveLength(1);
    const events = await harness.eventsFor(jobId);
    expect(events).toHaveLength(1);
    expect(events[0]?.msgId).toBe(`${jobId}:job.failed`);
    expect(events[0]?.body).toMatchObject({
      event: 'job.failed',
      status: 'failed',
      error: 'boom 4',
      inline: false,
    });
    await expect.poll(() => notified).toContainEqual({ jobId, status: 'failed' });
  });

  it('fails at once on a permanent error', async () => {
    const jobId = await queuedAudioJob();
    await begin(jobId, 1);
    expect(await fail(jobId, 1, true)).toEqual({ status: 'failed', retryInMs: 0 });
    expect(refundsOf(jobId)).toHaveLength(1);
  });

  it('counts a crashed attempt: a new delivery of a processing job is the next attempt', async () => {
    const jobId = await queuedAudioJob();
    expect((await begin(jobId, 1)).action).toBe('run');
    // The worker died; the lease lapsed; JetStream redelivers as delivery 2.
    expect((await begin(jobId, 2)).action).toBe('run');
    expect(await stored(jobId)).toMatchObject({ status: 'processing', attempts: 2 });
    // Delivery 1's worker was alive after all and asks again: delivery 2 holds the message now.
    expect(await begin(jobId, 1)).toEqual({ action: 'superseded' });
    expect(await stored(jobId)).toMatchObject({ status: 'processing', attempts: 2 });
    // Attempt 1 (lost) and 2, 3 failed: the 4th attempt is the last one.
    expect((await fail(jobId, 2)).status).toBe('pending');
    expect((await begin(jobId, 3)).action).toBe('run');
    expect((await fail(jobId, 3)).status).toBe('pending');
    expect((await begin(jobId, 4)).action).toBe('run');
    expect((await fail(jobId, 4)).status).toBe('failed');
    expect(refundsOf(jobId)).toHaveLength(1);
  });

  it('does not count an attempt handed back on shutdown: 4 real attempts remain', async () => {
    const jobId = await queuedAudioJob();
    expect((await begin(jobId, 1)).action).toBe('run');
    // The worker shuts down mid-job, tells the job service, then naks: delivery 2 follows.
    expect(await handBack(jobId, 1)).toEqual({ accepted: true });
    expect(await stored(jobId)).toMatchObject({ status: 'pending', attempts: 0, handedBack: 1 });
    expect(await handBack(jobId, 1)).toEqual({ accepted: false });

    expect((await begin(jobId, 2)).action).toBe('run');
    expect(await stored(jobId)).toMatchObject({ status: 'processing', attempts: 1 });
    // Deliveries 2–5 are attempts 1–4: three retries, then the 4th failure fails the job.
    const outcomes = [];
    for (let delivery = 2; delivery <= 5; delivery++) {
      if (delivery > 2) expect((await begin(jobId, delivery)).action).toBe('run');
      outcomes.push((await fail(jobId, delivery)).status);
    }
    expect(outcomes).toEqual(['pending', 'pending', 'pending', 'failed']);
    expect(await stored(jobId)).toMatchObject({ status: 'failed', attempts: 4 });
    expect(refundsOf(jobId)).toHaveLength(1);
  });

  it('completes the running attempt in one command, and decides on a read when it is not that case', async () => {
    const jobId = await queuedAudioJob();
    await begin(jobId, 1);
    // The creation's own close first, so that only the completion's commands are counted.
    await expect.poll(() => harness.admissionOpen(jobId), CONFIRMED).toBe(false);
    const recording = recordQueries(harness.mongo);
    // Other tests' confirmations may be written meanwhile: only this job's commands count.
    const onThisJob = () =>
      recording.queries.filter(
        (query) => query.collection === 'jobs' && JSON.stringify(query.filter).includes(jobId),
      );
    expect(await complete(jobId, 1)).toEqual({ accepted: true });
    // Long enough for a flag written behind the answer to have landed, had there been one: the
    // delivery, not a flag, answers for the event (the next test).
    await new Promise((resolve) => setTimeout(resolve, 2 * WRITE_BEHIND_LINGER_MS));
    recording.stop();
    expect(onThisJob().map((query) => query.command)).toEqual(['findAndModify']);
    expect(await stored(jobId)).toMatchObject({ status: 'completed', attempts: 1 });
    expect(await stored(jobId)).not.toHaveProperty('eventPublished');
    expect(await harness.eventsFor(jobId)).toHaveLength(1);

    // After a hand-back the delivery number is not the attempt: decided on the job as read.
    const handedBack = await queuedAudioJob();
    await begin(handedBack, 1);
    await handBack(handedBack, 1);
    await begin(handedBack, 2);
    expect(await complete(handedBack, 2)).toEqual({ accepted: true });
    expect(await stored(handedBack)).toMatchObject({ status: 'completed', attempts: 1 });

    // A late report of an attempt given up on completes what is running, once.
    const late = await queuedAudioJob();
    await begin(late, 1);
    await begin(late, 2);
    expect(await complete(late, 1)).toEqual({ accepted: true });
    expect(await complete(late, 2)).toEqual({ accepted: true });
    expect(await stored(late)).toMatchObject({ status: 'completed', attempts: 2 });
    expect(await harness.eventsFor(late)).toHaveLength(1);
  });

  it('publishes the event of a completion EVENTS refused when the report or its delivery comes again', async () => {
    const stream = harness.topology.streams.events;
    const pauseEvents = () =>
      harness.jsm.streams.update(stream.name, { subjects: [`paused-${stream.name}.*`] });
    const resumeEvents = () =>
      harness.jsm.streams.update(stream.name, { subjects: stream.subjects });
    const [reportedAgain, deliveredAgain] = [await queuedAudioJob(), await queuedAudioJob()];
    for (const jobId of [reportedAgain, deliveredAgain]) await begin(jobId, 1);
    // The completion is stored but its event cannot be published: the worker is told to keep
    // its delivery (UNAVAILABLE), as it is when the job service dies between the two.
    await pauseEvents();
    try {
      for (const jobId of [reportedAgain, deliveredAgain]) {
        expect((await errorOf(complete(jobId, 1))).code).toBe('UNAVAILABLE');
      }
    } finally {
      await resumeEvents();
    }
    for (const jobId of [reportedAgain, deliveredAgain]) {
      expect(await stored(jobId)).toMatchObject({ status: 'completed', attempts: 1 });
      expect(await harness.eventsFor(jobId)).toHaveLength(0);
    }

    // The worker asks again; or it died, and the next worker's delivery meets the completed job.
    expect(await complete(reportedAgain, 1)).toEqual({ accepted: true });
    expect(await begin(deliveredAgain, 2)).toEqual({ action: 'skip' });
    for (const jobId of [reportedAgain, deliveredAgain]) {
      expect(await harness.eventsFor(jobId)).toHaveLength(1);
      // Once, however often it comes again.
      expect(await begin(jobId, 3)).toEqual({ action: 'skip' });
      expect(await complete(jobId, 1)).toEqual({ accepted: true });
      expect(await harness.eventsFor(jobId)).toHaveLength(1);
    }
  });

  it('refuses to hand back an attempt that is not the one running', async () => {
    const jobId = await queuedAudioJob();
    expect(await handBack(jobId, 1)).toEqual({ accepted: false }); // never began
    expect((await begin(jobId, 1)).action).toBe('run');
    expect((await begin(jobId, 2)).action).toBe('run'); // delivery 1's worker was lost
    expect(await handBack(jobId, 1)).toEqual({ accepted: false }); // stale
    expect(await complete(jobId, 2)).toEqual({ accepted: true });
    expect(await handBack(jobId, 2)).toEqual({ accepted: false }); // finished
    expect(await stored(jobId)).toMatchObject({ status: 'completed', attempts: 2 });
  });

  it('fails and refunds a job whose last attempt was lost (delivery number > 4)', async () => {
    const jobId = await queuedAudioJob();
    for (let attempt = 1; attempt <= 3; attempt++) {
      await begin(jobId, attempt);
      await fail(jobId, attempt);
    }
    expect((await begin(jobId, 4)).action).toBe('run');
    // Attempt 4's worker died mid-job.
    expect(await begin(jobId, 5)).toEqual({ action: 'failed' });
    expect(await begin(jobId, 6)).toEqual({ action: 'skip' });
    const job = await getJob(jobId);
    expect(job.status).toBe('failed');
    expect(job.error).toMatch(/attempts/);
    expect(refundsOf(jobId)).toHaveLength(1);
    expect((await harness.eventsFor(jobId)).map((event) => event.body.event)).toEqual([
      'job.failed',
    ]);
    // A late success of the lost attempt cannot revive it.
    expect(await complete(jobId, 4)).toEqual({ accepted: false });
  });

  it('lets exactly one of several concurrent deliveries start the job', async () => {
    const jobId = await queuedAudioJob();
    const outcomes = await Promise.all([1, 1, 1, 1, 1].map((attempt) => begin(jobId, attempt)));
    // Each is the same delivery asking: all run the one attempt, and the job moved once.
    expect(outcomes.every((outcome) => outcome.action === 'run')).toBe(true);
    expect(await stored(jobId)).toMatchObject({ status: 'processing', attempts: 1 });
  });
});

describe('metrics of settled jobs', () => {
  /** Finished jobs and timed durations of queued audio jobs with this preset label and status. */
  const settledWith = async (preset: string, status: 'completed' | 'failed') => ({
    finished: await harness.metricValue('tamp_jobs_finished_total', {
      pipeline: 'audio',
      preset,
      status,
      mode: 'queued',
    }),
    timed: await harness.metricValue('tamp_job_duration_seconds_count', {
      pipeline: 'audio',
      preset,
      status,
    }),
  });

  it('stores the preset a chain was expanded from, null for explicit operations', async () => {
    const fromPreset = await queuedAudioJob({ preset: 'podcast' });
    const explicit = await queuedAudioJob();
    expect(await stored(fromPreset)).toMatchObject({ preset: 'podcast' });
    expect(await stored(explicit)).toMatchObject({ preset: null });
  });

  it('counts a finished job once however often its completion is reported or delivered', async () => {
    const before = await settledWith('podcast', 'completed');
    const jobId = await queuedAudioJob({ preset: 'podcast' });
    await begin(jobId, 1);
    await complete(jobId, 1);
    // Each republishes the event into EVENTS' dedup; only its first store is counted.
    await complete(jobId, 1);
    expect((await begin(jobId, 2)).action).toBe('skip');
    expect(await harness.eventsFor(jobId)).toHaveLength(1);
    expect(await settledWith('podcast', 'completed')).toEqual({
      finished: before.finished + 1,
      timed: before.timed + 1,
    });
  });

  it('labels finished jobs and durations by preset: its name, custom, or unrecorded for older jobs', async () => {
    const before = {
      podcast: await settledWith('podcast', 'completed'),
      custom: await settledWith('custom', 'failed'),
      unrecorded: await settledWith('unrecorded', 'completed'),
    };
    const fromPreset = await queuedAudioJob({ preset: 'podcast' });
    await begin(fromPreset, 1);
    await complete(fromPreset, 1);
    const explicit = await queuedAudioJob();
    await begin(explicit, 1);
    await fail(explicit, 1, true);
    // A job stored before jobs recorded their preset: it may have run one or not.
    const older = await queuedAudioJob({ preset: 'podcast' });
    await harness.db
      .collection(JOBS_COLLECTION)
      .updateOne({ _id: older as never }, { $unset: { preset: '' } });
    await begin(older, 1);
    await complete(older, 1);

    expect(await settledWith('podcast', 'completed')).toEqual({
      finished: before.podcast.finished + 1,
      timed: before.podcast.timed + 1,
    });
    expect(await settledWith('custom', 'failed')).toEqual({
      finished: before.custom.finished + 1,
      timed: before.custom.timed + 1,
    });
    expect(await settledWith('unrecorded', 'completed')).toEqual({
      finished: before.unrecorded.finished + 1,
      timed: before.unrecorded.timed + 1,
    });
  });
});

describe('sweepers', () => {
  it('republishes a created job stored before admissions answered for the publish, whose publish was never confirmed', async () => {
    const jobId = await queuedAudioJob();
    await expect.poll(() => harness.admissionOpen(jobId), CONFIRMED).toBe(false);
    // Such a job carries the flag its creation would have confirmed.
    await harness.db
      .collection(JOBS_COLLECTION)
      .updateOne(
        { _id: jobId as never },
        { $set: { workPublished: false, createdAt: new Date(Date.now() - 10 * 60_000) } },
      );
    const report = await harness.service.sweep();
    expect(report.republished).toBeGreaterThanOrEqual(1);
    // JOBS deduplicates on the job id: still one message.
    expect(await harness.workFor(jobId)).toHaveLength(1);
    expect((await stored(jobId))?.workPublished).toBe(true);
  });

  /**
   * Passes as of `now` until the expiry walks reached its hour (a pass visits a few hours of a
   * fresh process's week of look-back): what they expired together.
   */
  async function sweepCaughtUp(
    now: Date,
  ): Promise<{ expiredResults: number; expiredKeys: number }> {
    const total = { expiredResults: 0, expiredKeys: 0 };
    for (let pass = 0; pass < 40; pass++) {
      const report = await harness.service.sweep(now);
      total.expiredResults += report.expiredResults;
      total.expiredKeys += report.expiredKeys;
    }
    return total;
  }

  it('expires results 7 days after completion: object deleted, metrics kept', async () => {
    const uploadId = harness.addUpload(accountId, 'big.png', 6 * MB, 'image/png');
    const jobId = (
      await harness.createJob(imageRequest(accountId, uploadId, { idempotencyKey: 'ret' }))
    ).job.id;
    const claims = harness.db.collection(IDEMPOTENCY_COLLECTION);
    const key = `results/${accountId}/${jobId}/result.webp`;
    await harness.store.putBuffer(key, Buffer.from('webp'), 'image/webp');
    await begin(jobId, 1);
    await complete(jobId, 1, key);
    expect((await getJob(jobId)).result?.outputUrl).toBeDefined();

    const hour = 60 * 60_000;
    await sweepCaughtUp(new Date(Date.now() + 23 * hour));
    expect(await claims.countDocuments({ _id: `${accountId}:ret` as never })).toBe(1);
    const early = await sweepCaughtUp(new Date(Date.now() + 6 * 24 * hour));
    expect(early.expiredResults).toBe(0);
    expect(early.expiredKeys).toBeGreaterThanOrEqual(1);
    expect(await claims.countDocuments({ _id: `${accountId}:ret` as never })).toBe(0);
    expect(await harness.store.stat(key)).toBeDefined();
    const report = await sweepCaughtUp(new Date(Date.now() + 8 * 24 * hour));
    expect(report.expiredResults).toBeGreaterThanOrEqual(1);

    expect(await harness.store.stat(key)).toBeUndefined();
    const job = await getJob(jobId);
    expect(job).toEqual({
      id: jobId,
      status: 'completed',
      result: {
        expired: true,
        metrics: expect.objectContaining({
          inputSize: 1000,
          outputSize: 300,
          compressionRatio: 3.333,
        }),
      },
    });
  });
});
