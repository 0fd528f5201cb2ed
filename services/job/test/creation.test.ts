import type { Subscription } from '@nats-io/nats-core';
import { WRITE_BEHIND_LINGER_MS } from '@tamp/kit';
import { billingEndpoints, creditCost, jobEndpoints, KB, MB, newId } from '@tamp/proto';
import { ulid } from 'ulid';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { recordQueries } from '../../../test/support/query-plans';
import { IdempotencyRepository } from '../src/adapters/idempotency-repository';
import {
  ADMISSIONS_COLLECTION,
  IDEMPOTENCY_COLLECTION,
  JOBS_COLLECTION,
} from '../src/adapters/job-repository';
import {
  audioRequest,
  CONFIRMED,
  errorOf,
  imageRequest,
  JobHarness,
  newAccount,
  textRequest,
} from './harness';

/** A queued job as its creation leaves it: no attempt yet. */
const QUEUED = { status: 'created', inline: false, attempts: 0 } as const;

const harness = new JobHarness();
let inlineWorker: Subscription | undefined;

beforeAll(() => harness.start());
afterEach(async () => {
  inlineWorker?.unsubscribe();
  inlineWorker = undefined;
  await harness.peerNats.flush();
});
afterAll(() => harness.stop());

const textMetrics = {
  inputSize: 10,
  outputSize: 4,
  compressionRatio: 99,
  operationsApplied: ['trim'],
  processingMs: 3,
};

describe('queued creation', () => {
  it('answers 202 created, reserves the cost and publishes exactly one JOBS message', async () => {
    const accountId = newAccount();
    const uploadId = harness.addUpload(accountId, 'talk.mp3', 12 * MB, 'audio/mpeg');
    const request = audioRequest(accountId, uploadId, { webhookUrl: 'https://example.com/hook' });

    const answer = await harness.createJob(request);

    expect(answer).toEqual({ httpStatus: 202, job: { id: request.jobId, status: 'created' } });
    expect(harness.reserveCalls.filter((call) => call.jobId === request.jobId)).toEqual([
      { accountId, jobId: request.jobId, pipeline: 'audio', credits: creditCost('audio', 12 * MB) },
    ]);
    const work = await harness.workFor(request.jobId);
    expect(work).toHaveLength(1);
    expect(work[0]?.subject).toBe(harness.topology.subjects.jobs.audio);
    expect(work[0]?.msgId).toBe(request.jobId);
    expect(work[0]?.body).toMatchObject({
      jobId: request.jobId,
      accountId,
      pipeline: 'audio',
      input: {
        kind: 'upload',
        uploadId,
        key: `uploads/${accountId}/${uploadId}`,
        size: 12 * MB,
        filename: 'talk.mp3',
      },
      operations: [{ type: 'encode', params: { format: 'opus', bitrate: 24, channels: 1 } }],
    });
    // The work published, the creation closes its admission (written behind the answer).
    await expect.poll(() => harness.admissionOpen(request.jobId), CONFIRMED).toBe(false);
    expect(await harness.storedJob(request.jobId)).toMatchObject({
      ...QUEUED,
      filename: 'talk.mp3',
    });
  });

  it('propagates upload errors unchanged and creates nothing', async () => {
    const accountId = newAccount();
    const request = audioRequest(accountId, newId('upload'));
    expect((await errorOf(harness.createJob(request))).code).toBe('UPLOAD_NOT_FOUND');
    expect(await harness.db.collection(JOBS_COLLECTION).countDocuments({ accountId })).toBe(0);
  });

  it('creates nothing when credits are insufficient, and frees the key for a retry', async () => {
    const accountId = newAccount();
    harness.credits.set(accountId, 1);
    const uploadId = harness.addUpload(accountId, 'big.wav', 11 * MB, 'audio/wav');
    const request = audioRequest(accountId, uploadId, { idempotencyKey: 'retry-me' });

    expect((await errorOf(harness.createJob(request))).code).toBe('INSUFFICIENT_CREDITS');
    expect(await harness.db.collection(JOBS_COLLECTION).countDocuments({ accountId })).toBe(0);
    expect(
      await harness.db
        .collection(IDEMPOTENCY_COLLECTION)
        .countDocuments({ _id: `${accountId}:retry-me` as never }),
    ).toBe(0);
    expect(await harness.workFor(request.jobId)).toHaveLength(0);

    harness.credits.set(accountId, 100);
    const retried = await harness.createJob({ ...request, jobId: newId('job') });
    expect(retried.httpStatus).toBe(202);
    expect(retried.job.status).toBe('created');
  });
});

describe('idempotency', () => {
  it('turns 50 concurrent identical requests into one job and one reservation', async () => {
    const accountId = newAccount();
    const uploadId = harness.addUpload(accountId, 'song.mp3', 3 * MB, 'audio/mpeg');
    const requests = Array.from({ length: 50 }, () =>
      audioRequest(accountId, uploadId, { idempotencyKey: 'same-key', requestHash: 'h-same' }),
    );

    const answers = await Promise.all(requests.map((request) => harness.createJob(request)));

    const ids = new Set(answers.map((answer) => answer.job.id));
    expect(ids.size).toBe(1);
    expect(answers.every((answer) => answer.httpStatus === 202)).toBe(true);
    expect(await harness.db.collection(JOBS_COLLECTION).countDocuments({ accountId })).toBe(1);
    expect(harness.reserveCalls.filter((call) => call.accountId === accountId)).toHaveLength(1);
    const [jobId] = [...ids];
    expect(await harness.workFor(jobId as string)).toHaveLength(1);
  });

  it('answers a replay with the job as it is now', async () => {
    const accountId = newAccount();
    const uploadId = harness.addUpload(accountId, 'a.mp3', 1000, 'audio/mpeg');
    const first = await harness.createJob(
      audioRequest(accountId, uploadId, { idempotencyKey: 'k' }),
    );
    const replay = await harness.createJob(
      audioRequest(accountId, uploadId, { idempotencyKey: 'k' }),
    );
    expect(replay).toEqual(first);
  });

  it('refuses the same key with a different body: IDEMPOTENCY_KEY_REUSED', async () => {
    const accountId = newAccount();
    const uploadId = harness.addUpload(accountId, 'a.mp3', 1000, 'audio/mpeg');
    await harness.createJob(
      audioRequest(accountId, uploadId, { idempotencyKey: 'k2', requestHash: 'one' }),
    );
    const error = await errorOf(
      harness.createJob(
        audioRequest(accountId, uploadId, { idempotencyKey: 'k2', requestHash: 'two' }),
      ),
    );
    expect(error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(error.httpStatus).toBe(422);
  });

  it('scopes keys to the account', async () => {
    const [first, second] = [newAccount(), newAccount()];
    const a = await harness.createJob(
      audioRequest(first, harness.addUpload(first, 'a.mp3', 1000, 'audio/mpeg'), {
        idempotencyKey: 'shared',
      }),
    );
    const b = await harness.createJob(
      audioRequest(second, harness.addUpload(second, 'b.mp3', 1000, 'audio/mpeg'), {
        idempotencyKey: 'shared',
      }),
    );
    expect(a.job.id).not.toBe(b.job.id);
  });

  it('converges when the claimant died between claiming the key and creating the job', async () => {
    const accountId = newAccount();
    const orphanJobId = newId('job');
    await harness.db.collection(IDEMPOTENCY_COLLECTION).insertOne({
      _id: `${accountId}:orphan` as never,
      jobId: orphanJobId,
      requestHash: 'hash-audio',
      createdAt: new Date(Date.now() - 60 * 60 * 1000),
    });
    const uploadId = harness.addUpload(accountId, 'a.mp3', 1000, 'audio/mpeg');
    const answer = await harness.createJob(
      audioRequest(accountId, uploadId, { idempotencyKey: 'orphan' }),
    );
    expect(answer).toEqual({ httpStatus: 202, job: { id: orphanJobId, status: 'created' } });
    expect(await harness.workFor(orphanJobId)).toHaveLength(1);
  });

  it('ignores the key of an inline-eligible request (inline jobs are not deduplicated)', async () => {
    inlineWorker = harness.serveInline('text', async () => ({
      status: 'completed',
      outputKey: null,
      outputText: 'x',
      metrics: textMetrics,
      usage: { inputBytes: 10 },
    }));
    const accountId = newAccount();
    const first = await harness.createJob(
      textRequest(accountId, 'hello', { idempotencyKey: 'inline' }),
    );
    const second = await harness.createJob(
      textRequest(accountId, 'hello', { idempotencyKey: 'inline' }),
    );
    expect(first.httpStatus).toBe(200);
    expect(second.httpStatus).toBe(200);
    expect(first.job.id).not.toBe(second.job.id);
  });
});

describe('money under any timing', () => {
  const minutesFromNow = (minutes: number) => new Date(Date.now() + minutes * 60_000);
  const admissions = () => harness.db.collection(ADMISSIONS_COLLECTION);
  /** Jobs of the account; abandoned creations share the collection but are not jobs. */
  const jobsOf = (accountId: string) =>
    harness.db.collection(JOBS_COLLECTION).countDocuments({ accountId, status: { $exists: true } });
  const read = (accountId: string, jobId: string) =>
    harness.rpc.call(jobEndpoints.getJob, { accountId, jobId });

  it('answers 503 when the reservation is late, gives it back, and frees the key', async () => {
    const accountId = newAccount();
    harness.credits.set(accountId, 10);
    const uploadId = harness.addUpload(accountId, 'a.mp3', 1000, 'audio/mpeg');
    const request = audioRequest(accountId, uploadId, { idempotencyKey: 'slow' });
    harness.reserveDelayMs = 3_000;
    try {
      const error = await errorOf(harness.createJob(request, { deadline: Date.now() + 1_500 }));
      expect(error.code).toBe('UNAVAILABLE');
      // Settled before answering: the id is named, and nothing will ever exist under it.
      expect(error.details).toEqual({ jobId: request.jobId, outcome: 'not-created' });
    } finally {
      harness.reserveDelayMs = 0;
    }
    // Billing applied the reservation after the creation gave up; the release undoes it.
    await expect.poll(() => harness.credits.get(accountId), { timeout: 10_000 }).toBe(10);
    expect(await jobsOf(accountId)).toBe(0);
    expect(await admissions().countDocuments({ accountId })).toBe(0);
    const answer = await errorOf(read(accountId, request.jobId));
    expect([answer.code, answer.details]).toEqual(['JOB_NOT_FOUND', { outcome: 'not-created' }]);

    const retried = await harness.createJob({ ...request, jobId: newId('job') });
    expect(retried.httpStatus).toBe(202);
    expect(harness.credits.get(accountId)).toBe(9);
  });

  /**
   * A keyed creation of an account holding 10 credits, given up while billing was away: billing
   * cannot confirm the release either, so the admission stays open, and a retry with the key
   * (once the first request has given up on the release too) is told to wait. Billing is back
   * when this returns, with the twin's last answer.
   */
  const leaveInDoubt = async (idempotencyKey: string) => {
    const accountId = newAccount();
    harness.credits.set(accountId, 10);
    const uploadId = harness.addUpload(accountId, 'a.mp3', 1000, 'audio/mpeg');
    const request = audioRequest(accountId, uploadId, { idempotencyKey });
    harness.billingDown = true;
    try {
      const error = await errorOf(harness.createJob(request, { deadline: Date.now() + 1_000 }));
      expect(error.code).toBe('UNAVAILABLE');
      const twin = () => errorOf(harness.createJob({ ...request, jobId: newId('job') }));
      await expect
        .poll(async () => (await twin()).code, { timeout: 20_000 })
        .toBe('IDEMPOTENCY_KEY_IN_USE');
      return { accountId, request, twin: await twin() };
    } finally {
      harness.billingDown = false;
    }
  };

  it('answers IDEMPOTENCY_KEY_IN_USE while a creation is in doubt, until the reconciler settles it', async () => {
    const { accountId, request, twin } = await leaveInDoubt('doubt');
    expect(twin.httpStatus).toBe(409);
    expect(await admissions().countDocuments({ accountId })).toBe(1);
    const report = await harness.service.sweep(minutesFromNow(10));
    expect(report.admissionsClosed).toBeGreaterThanOrEqual(1);
    expect(await admissions().countDocuments({ accountId })).toBe(0);
    expect(harness.refundCalls.some((call) => call.jobId === request.jobId)).toBe(true);

    const retried = await harness.createJob({ ...request, jobId: newId('job') });
    expect(retried.httpStatus).toBe(202);
    expect(await jobsOf(accountId)).toBe(1);
    expect(harness.credits.get(accountId)).toBe(9);
  });

  it('settles an abandoned creation although another sweeper of the same pass fails', async () => {
    const { accountId, request } = await leaveInDoubt('doubt-and-a-failure');
    // The same sweepers on the same store, whose idempotency-key expiry fails (its query timed
    // out, say): the expiry runs before the settlement of abandoned creations in a pass.
    const sweeper = harness.sweeperWith({
      claims: new (class extends IdempotencyRepository {
        override deleteExpired(): Promise<number> {
          return Promise.reject(new Error('the key expiry query timed out'));
        }
      })(harness.db),
    });
    const report = await sweeper.sweep(minutesFromNow(10));
    expect(report).toMatchObject({ expiredKeys: 0, admissionsClosed: 1 });
    expect(await admissions().countDocuments({ _id: request.jobId as never })).toBe(0);
    expect(harness.refundCalls.some((call) => call.jobId === request.jobId)).toBe(true);
    expect(harness.credits.get(accountId)).toBe(10);
  });

  it('settles a creation left in doubt on a retry of its key once billing answers, without the reconciler', async () => {
    const accountId = newAccount();
    harness.credits.set(accountId, 10);
    const uploadId = harness.addUpload(accountId, 'a.mp3', 1000, 'audio/mpeg');
    const request = audioRequest(accountId, uploadId, { idempotencyKey: 'doubt-then-back' });
    harness.billingDown = true;
    try {
      const error = await errorOf(harness.createJob(request, { deadline: Date.now() + 1_000 }));
      expect(error.code).toBe('UNAVAILABLE');
      expect(await admissions().countDocuments({ _id: request.jobId as never })).toBe(1);
    } finally {
      harness.billingDown = false;
    }
    // No sweep: the retry finds the abandoned creation holding its reservation and releases it.
    const retried = await harness.createJob({ ...request, jobId: newId('job') });
    expect(retried.httpStatus).toBe(202);
    expect(retried.job.id).not.toBe(request.jobId);
    expect(harness.refundCalls.some((call) => call.jobId === request.jobId)).toBe(true);
    expect(await admissions().countDocuments({ _id: request.jobId as never })).toBe(0);
    expect(await jobsOf(accountId)).toBe(1);
    expect(harness.credits.get(accountId)).toBe(9);
  });

  it('lets a retry of the key settle a creation that died after reserving, once its deadline is past', async () => {
    const accountId = newAccount();
    harness.credits.set(accountId, 10);
    const diedJobId = newId('job');
    const uploadId = harness.addUpload(accountId, 'a.mp3', 1000, 'audio/mpeg');
    const request = audioRequest(accountId, uploadId, { idempotencyKey: 'died-reserved' });
    // What a creation leaves when its process dies between the reservation and the job: the
    // key claimed, the admission open (its deadline given), the credits reserved.
    const leaveDiedCreation = async (deadline: Date) => {
      await harness.db.collection(IDEMPOTENCY_COLLECTION).insertOne({
        _id: `${accountId}:died-reserved` as never,
        jobId: diedJobId,
        requestHash: request.requestHash,
        // Claimed longer ago than the stale window: its creation's budget has run out.
        createdAt: new Date(Date.now() - 60 * 60 * 1000),
      });
      await admissions().insertOne({
        _id: diedJobId as never,
        accountId,
        claimId: `${accountId}:died-reserved`,
        createdAt: new Date(),
        deadline,
      });
      await harness.rpc.call(billingEndpoints.reserveCredits, {
        accountId,
        jobId: diedJobId,
        pipeline: 'audio',
        credits: 3,
      });
    };
    // Its deadline not yet past: it might still store its job, so the key stays in use.
    await leaveDiedCreation(new Date(Date.now() + 60_000));
    const early = await errorOf(harness.createJob({ ...request, jobId: newId('job') }));
    expect(early.code).toBe('IDEMPOTENCY_KEY_IN_USE');
    expect(harness.credits.get(accountId)).toBe(7);

    await admissions().updateOne(
      { _id: diedJobId as never },
      { $set: { deadline: new Date(Date.now() - 5_000) } },
    );
    const retried = await harness.createJob({ ...request, jobId: newId('job') });
    expect(retried.httpStatus).toBe(202);
    expect(retried.job.id).not.toBe(diedJobId);
    expect(await admissions().countDocuments({ _id: diedJobId as never })).toBe(0);
    expect(await jobsOf(accountId)).toBe(1);
    // The dead creation's 3 credits back, the retry's job charged once.
    expect(harness.credits.get(accountId)).toBe(10 - creditCost('audio', 1000));
    const answer = await errorOf(read(accountId, diedJobId));
    expect(answer.details).toEqual({ outcome: 'not-created' });
  });

  it('releases the reservation of a creation that died after reserving', async () => {
    const accountId = newAccount();
    harness.credits.set(accountId, 10);
    const jobId = newId('job');
    // What a creation leaves when its process dies between the reservation and the job.
    await admissions().insertOne({
      _id: jobId as never,
      accountId,
      claimId: null,
      createdAt: new Date(),
      deadline: new Date(),
    });
    await harness.rpc.call(billingEndpoints.reserveCredits, {
      accountId,
      jobId,
      pipeline: 'audio',
      credits: 3,
    });
    expect(harness.credits.get(accountId)).toBe(7);
    // Not before the deadline is long past: the creation might still store its job.
    await harness.service.sweep(new Date());
    expect(await admissions().countDocuments({ _id: jobId as never })).toBe(1);
    expect(harness.credits.get(accountId)).toBe(7);
    await harness.service.sweep(minutesFromNow(10));
    expect(await admissions().countDocuments({ _id: jobId as never })).toBe(0);
    expect(harness.credits.get(accountId)).toBe(10);
    // The id is taken: a job write of that creation still on its way can never land.
    const lateWrite = await harness.db
      .collection(JOBS_COLLECTION)
      .insertOne({ _id: jobId as never, accountId, status: 'created' })
      .then(
        () => 'stored',
        (error: { code?: number }) => error.code,
      );
    expect(lateWrite).toBe(11000);
    const answer = await errorOf(read(accountId, jobId));
    expect(answer.details).toEqual({ outcome: 'not-created' });
  });

  it('answers for good, without writing, that an old id holding nothing was never created', async () => {
    const accountId = newAccount();
    harness.credits.set(accountId, 10);
    // The gateway timed out (503, outcome unknown, this id); the job service never answered.
    const uploadId = harness.addUpload(accountId, 'a.mp3', 1000, 'audio/mpeg');
    const fresh = audioRequest(accountId, uploadId);
    // While a creation of it could still be under way, the answer is not final.
    const early = await errorOf(read(accountId, fresh.jobId));
    expect([early.code, early.details]).toEqual(['JOB_NOT_FOUND', undefined]);

    const old = { ...fresh, jobId: `job_${ulid(Date.now() - 3 * 60_000)}` };
    const answer = await errorOf(read(accountId, old.jobId));
    expect([answer.code, answer.details]).toEqual(['JOB_NOT_FOUND', { outcome: 'not-created' }]);
    // The creation arrives after all (a stalled request): too old to start, nothing written.
    const late = await errorOf(harness.createJob(old));
    expect([late.code, late.details]).toEqual([
      'UNAVAILABLE',
      { jobId: old.jobId, outcome: 'not-created' },
    ]);
    expect(await harness.db.collection(JOBS_COLLECTION).countDocuments({ accountId })).toBe(0);
    expect(await admissions().countDocuments({ accountId })).toBe(0);
    expect(harness.credits.get(accountId)).toBe(10);
  });

  it('says nothing about another account’s abandoned creation', async () => {
    const accountId = newAccount();
    harness.credits.set(accountId, 10);
    const uploadId = harness.addUpload(accountId, 'a.mp3', 1000, 'audio/mpeg');
    const request = audioRequest(accountId, uploadId);
    harness.reserveDelayMs = 3_000;
    try {
      await errorOf(harness.createJob(request, { deadline: Date.now() + 1_500 }));
    } finally {
      harness.reserveDelayMs = 0;
    }
    const stranger = await errorOf(read(newAccount(), request.jobId));
    expect([stranger.code, stranger.details]).toEqual(['JOB_NOT_FOUND', undefined]);
  });
});

describe('inline path', () => {
  it('answers 200 completed with outputText for fast-path text', async () => {
    const received: unknown[] = [];
    inlineWorker = harness.serveInline('text', async (work) => {
      received.push(work);
      return {
        status: 'completed',
        outputKey: null,
        outputText: 'a b',
        metrics: {
          inputSize: 10,
          outputSize: 3,
          compressionRatio: 1,
          operationsApplied: ['trim'],
          processingMs: 2,
          tokensIn: 4,
          tokensOut: 2,
        },
        usage: { inputBytes: 10, characters: 10 },
      };
    });
    const accountId = newAccount();
    const request = textRequest(accountId, 'a    b    ');
    const recording = recordQueries(harness.mongo);

    const answer = await harness.createJob(request);

    expect(answer).toEqual({
      httpStatus: 200,
      job: {
        id: request.jobId,
        status: 'completed',
        result: {
          outputText: 'a b',
          metrics: {
            inputSize: 10,
            outputSize: 3,
            compressionRatio: 3.333,
            operationsApplied: ['trim'],
            processingMs: 2,
            tokensIn: 4,
            tokensOut: 2,
          },
        },
      },
    });
    expect(received).toEqual([
      expect.objectContaining({
        jobId: request.jobId,
        input: { kind: 'text', text: 'a    b    ' },
      }),
    ]);
    expect(await harness.workFor(request.jobId)).toHaveLength(0);
    const events = await harness.eventsFor(request.jobId);
    expect(events).toHaveLength(1);
    expect(events[0]?.msgId).toBe(`${request.jobId}:job.completed`);
    expect(events[0]?.body).toMatchObject({
      event: 'job.completed',
      inline: true,
      status: 'completed',
      usage: { characters: 10 },
    });
    expect(harness.reserveCalls.filter((call) => call.jobId === request.jobId)).toHaveLength(1);
    // Stored once, in its terminal state, and never written again: the admission answered for
    // the event until it was closed behind the answer, so no outbox flag follows.
    await expect.poll(() => harness.admissionOpen(request.jobId), CONFIRMED).toBe(false);
    recording.stop();
    const jobWrites = recording.queries.filter(
      (query) =>
        query.collection === JOBS_COLLECTION &&
        JSON.stringify(query.filter).includes(request.jobId),
    );
    expect(jobWrites).toEqual([]);
    expect(await harness.storedJob(request.jobId)).not.toHaveProperty('eventPublished');
  });

  it('falls back to the queue (202) when no inline worker answers', async () => {
    const accountId = newAccount();
    const request = textRequest(accountId, 'no worker here');
    const answer = await harness.createJob(request);
    expect(answer).toEqual({ httpStatus: 202, job: { id: request.jobId, status: 'created' } });
    const work = await harness.workFor(request.jobId);
    expect(work).toHaveLength(1);
    expect(work[0]?.body.input).toEqual({ kind: 'text', text: 'no worker here' });
  });

  it('falls back to the queue when the inline worker is too slow', async () => {
    inlineWorker = harness.serveInline('text', () => new Promise(() => undefined));
    const request = textRequest(newAccount(), 'slow');
    expect((await harness.createJob(request)).httpStatus).toBe(202);
    expect(await harness.workFor(request.jobId)).toHaveLength(1);
  });

  // A reply without `retryable` comes from a worker that predates the flag: read as permanent.
  it.each([
    { worker: 'current', reply: { retryable: false } },
    { worker: 'older', reply: {} },
  ])(
    'answers 200 failed for a permanent inline failure ($worker worker), refunded once',
    async ({ worker, reply }) => {
      inlineWorker = harness.serveInline('text', async () => ({
        status: 'failed',
        error: 'cannot trim that',
        ...reply,
      }));
      const request = textRequest(newAccount(), `broken by the ${worker} worker`);

      const answer = await harness.createJob(request);

      expect(answer).toEqual({
        httpStatus: 200,
        job: { id: request.jobId, status: 'failed', error: 'cannot trim that' },
      });
      expect(harness.refundCalls.filter((call) => call.jobId === request.jobId)).toHaveLength(1);
      expect(await harness.workFor(request.jobId)).toHaveLength(0);
      const events = await harness.eventsFor(request.jobId);
      expect(events).toHaveLength(1);
      expect(events[0]?.body).toMatchObject({
        event: 'job.failed',
        inline: true,
        error: 'cannot trim that',
      });
      await expect
        .poll(() => harness.storedJob(request.jobId), CONFIRMED)
        .toMatchObject({ refundPending: false });
      await expect.poll(() => harness.admissionOpen(request.jobId), CONFIRMED).toBe(false);
    },
  );

  it('queues a job whose inline failure is retryable (202): not failed, not refunded', async () => {
    inlineWorker = harness.serveInline('text', async () => ({
      status: 'failed',
      error: 'The input file could not be read from storage',
      retryable: true,
    }));
    const request = textRequest(newAccount(), 'storage hiccup');

    const answer = await harness.createJob(request);

    expect(answer).toEqual({ httpStatus: 202, job: { id: request.jobId, status: 'created' } });
    const work = await harness.workFor(request.jobId);
    expect(work).toHaveLength(1);
    expect(work[0]?.msgId).toBe(request.jobId);
    expect(harness.refundCalls.filter((call) => call.jobId === request.jobId)).toHaveLength(0);
    expect(harness.reserveCalls.filter((call) => call.jobId === request.jobId)).toHaveLength(1);
    expect(await harness.eventsFor(request.jobId)).toHaveLength(0);
    // The inline attempt is not one of the queued attempts: all of them are still ahead.
    await expect.poll(() => harness.admissionOpen(request.jobId), CONFIRMED).toBe(false);
    expect(await harness.storedJob(request.jobId)).toMatchObject({
      ...QUEUED,
      error: null,
      refundPending: false,
    });
  });

  it('queues text over the fast-path size, text with a webhook, AVIF and large images', async () => {
    inlineWorker = harness.serveInline('text', async () => {
      throw new Error('must not be called');
    });
    const accountId = newAccount();
    const large = await harness.createJob(textRequest(accountId, 'x'.repeat(50 * KB + 1)));
    const hooked = await harness.createJob(
      textRequest(accountId, 'x', { webhookUrl: 'https://example.com/h' }),
    );
    const avif = await harness.createJob(
      imageRequest(accountId, harness.addUpload(accountId, 'a.png', 1000, 'image/png'), {
        operations: [{ type: 'encode', params: { format: 'avif' } }],
      }),
    );
    const big = await harness.createJob(
      imageRequest(accountId, harness.addUpload(accountId, 'b.png', 5 * MB + 1, 'image/png')),
    );
    expect([large, hooked, avif, big].map((answer) => answer.httpStatus)).toEqual([
      202, 202, 202, 202,
    ]);
  });

  it('runs a small image inline and its outputUrl downloads the bytes', async () => {
    const accountId = newAccount();
    const output = Buffer.from('RIFF....WEBPVP8 fake image bytes');
    inlineWorker = harness.serveInline('image', async (work) => {
      const key = `results/${accountId}/${work.jobId}/result.webp`;
      await harness.store.putBuffer(key, output, 'image/webp');
      return {
        status: 'completed',
        outputKey: key,
        outputText: null,
        metrics: {
          inputSize: 2000,
          outputSize: output.length,
          compressionRatio: 0,
          operationsApplied: ['encode'],
          processingMs: 5,
          width: 10,
          height: 10,
        },
        usage: { inputBytes: 2000, megapixels: 0.0001 },
      };
    });
    const request = imageRequest(
      accountId,
      harness.addUpload(accountId, 'photo.png', 2000, 'image/png'),
    );

    const answer = await harness.createJob(request);

    expect(answer.httpStatus).toBe(200);
    expect(answer.job.status).toBe('completed');
    const url = answer.job.result?.outputUrl as string;
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-disposition')).toBe('attachment; filename="result.webp"');
    expect(Buffer.from(await response.arrayBuffer())).toEqual(output);
  });
});

/**
 * What a creation's process leaves when it dies after storing its job and before confirming
 * what follows: the job stored, the admission open past its deadline. The reconciler finishes
 * it once, whatever ran before it.
 */
describe('unfinished creations', () => {
  const admissions = () => harness.db.collection(ADMISSIONS_COLLECTION);
  const jobs = () => harness.db.collection(JOBS_COLLECTION);

  /** An admission its creation left open, its deadline just past. */
  const leaveAdmission = (jobId: string, accountId: string) =>
    admissions().insertOne({
      _id: jobId as never,
      accountId,
      claimId: null,
      createdAt: new Date(),
      deadline: new Date(Date.now() - 1_000),
    });

  /** A copy of a job a creation stored, under a new id that nothing was published for. */
  async function leftByDeadCreation(storedId: string): Promise<string> {
    const stored = await harness.storedJob(storedId);
    if (stored === null) throw new Error(`no job ${storedId}`);
    const jobId = newId('job');
    await jobs().insertOne({ ...stored, _id: jobId as never });
    await leaveAdmission(jobId, stored.accountId);
    return jobId;
  }

  it('publishes the work of a queued job whose creation died before publishing it, once', async () => {
    const accountId = newAccount();
    const uploadId = harness.addUpload(accountId, 'talk.mp3', 1000, 'audio/mpeg');
    const model = await harness.createJob(audioRequest(accountId, uploadId));
    const jobId = await leftByDeadCreation(model.job.id);
    expect(await harness.workFor(jobId)).toHaveLength(0);

    const first = await harness.service.sweep();
    expect(first.admissionsClosed).toBeGreaterThanOrEqual(1);
    expect(await harness.admissionOpen(jobId)).toBe(false);
    // Left again (the close lost to a second crash): JOBS deduplicates the repeat.
    await leaveAdmission(jobId, accountId);
    await harness.service.sweep();
    const work = await harness.workFor(jobId);
    expect(work).toHaveLength(1);
    expect(work[0]?.msgId).toBe(jobId);
    expect(await harness.admissionOpen(jobId)).toBe(false);
    // Finished, not abandoned: the job is still there and nothing was released.
    expect(await harness.storedJob(jobId)).toMatchObject(QUEUED);
    expect(harness.refundCalls.filter((call) => call.jobId === jobId)).toHaveLength(0);
  });

  it('publishes the event of an inline job whose creation died before publishing it, and refunds a failed one, once', async () => {
    inlineWorker = harness.serveInline('text', async () => ({
      status: 'failed',
      error: 'cannot trim that',
      retryable: false,
    }));
    const model = await harness.createJob(textRequest(newAccount(), 'broken'));
    expect(model.job.status).toBe('failed');
    const jobId = await leftByDeadCreation(model.job.id);
    await jobs().updateOne({ _id: jobId as never }, { $set: { refundPending: true } });

    await harness.service.sweep();
    await harness.service.sweep();

    const events = await harness.eventsFor(jobId);
    expect(events).toHaveLength(1);
    expect(events[0]?.body).toMatchObject({ event: 'job.failed', inline: true });
    expect(harness.refundCalls.filter((call) => call.jobId === jobId)).toHaveLength(1);
    expect(await harness.admissionOpen(jobId)).toBe(false);
    await expect
      .poll(() => harness.storedJob(jobId), CONFIRMED)
      .toMatchObject({ status: 'failed', refundPending: false });
  });

  it('keeps the admission of a queued job whose work could not be published, until the reconciler has published it', async () => {
    const stream = harness.topology.streams.jobs;
    const accountId = newAccount();
    const request = audioRequest(
      accountId,
      harness.addUpload(accountId, 'a.mp3', 1000, 'audio/mpeg'),
    );
    // JOBS takes no message while its subjects are elsewhere: the creation's publish fails.
    await harness.jsm.streams.update(stream.name, {
      subjects: [`paused-${stream.name}.*`],
    });
    let answer: Awaited<ReturnType<typeof harness.createJob>>;
    try {
      answer = await harness.createJob(request);
    } finally {
      await harness.jsm.streams.update(stream.name, { subjects: stream.subjects });
    }
    expect(answer).toEqual({ httpStatus: 202, job: { id: request.jobId, status: 'created' } });
    // Long enough for a close written behind the answer to have landed, had there been one.
    await new Promise((resolve) => setTimeout(resolve, 2 * WRITE_BEHIND_LINGER_MS));
    expect(await harness.admissionOpen(request.jobId)).toBe(true);
    expect(await harness.workFor(request.jobId)).toHaveLength(0);

    await harness.service.sweep(new Date(Date.now() + 60_000));

    expect(await harness.workFor(request.jobId)).toHaveLength(1);
    expect(await harness.admissionOpen(request.jobId)).toBe(false);
  });

  it('leaves a creation without a job alone until it may be abandoned', async () => {
    const accountId = newAccount();
    const jobId = newId('job');
    await leaveAdmission(jobId, accountId);
    await harness.service.sweep();
    expect(await harness.admissionOpen(jobId)).toBe(true);
    expect(await jobs().countDocuments({ _id: jobId as never })).toBe(0);
  });
});
