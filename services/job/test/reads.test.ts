import type { Subscription } from '@nats-io/nats-core';
import { jobEndpoints, LIMITS, MB, newId, publicJobSummary } from '@tamp/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordQueries } from '../../../test/support/query-plans';
import { ADMISSIONS_COLLECTION, JOBS_COLLECTION } from '../src/adapters/job-repository';
import { publicJobOf } from '../src/domain/representation';
import {
  audioRequest,
  errorOf,
  imageRequest,
  JobHarness,
  newAccount,
  textRequest,
} from './harness';

const harness = new JobHarness();
let failingTextWorker: Subscription;
const accountId = newAccount();
/** Created oldest first: audio, image, text(failed inline), audio, text(queued). */
const created: string[] = [];

beforeAll(async () => {
  await harness.start();
  const audio = () =>
    harness.createJob(
      audioRequest(accountId, harness.addUpload(accountId, 'voice.wav', 2 * MB, 'audio/wav')),
    );
  created.push((await audio()).job.id);
  created.push(
    (
      await harness.createJob(
        imageRequest(accountId, harness.addUpload(accountId, 'big.jpg', 6 * MB, 'image/jpeg')),
      )
    ).job.id,
  );
  failingTextWorker = harness.serveInline('text', async () => ({
    status: 'failed',
    error: 'bad text',
  }));
  created.push((await harness.createJob(textRequest(accountId, 'fails inline'))).job.id);
  failingTextWorker.unsubscribe();
  await harness.peerNats.flush();
  created.push((await audio()).job.id);
  created.push((await harness.createJob(textRequest(accountId, 'queued text'))).job.id);
});
afterAll(() => harness.stop());

const list = (
  query: {
    type?: 'audio' | 'image' | 'text' | 'video';
    status?: 'created' | 'failed';
    limit?: number;
    cursor?: string;
  },
  account = accountId,
) => harness.rpc.call(jobEndpoints.listJobs, { accountId: account, limit: 20, ...query });

describe('getJob', () => {
  it('answers the owner with the public representation', async () => {
    const id = created[0] as string;
    expect(await harness.rpc.call(jobEndpoints.getJob, { accountId, jobId: id })).toEqual({
      id,
      status: 'created',
    });
    expect(
      await harness.rpc.call(jobEndpoints.getJob, { accountId, jobId: created[2] as string }),
    ).toEqual({
      id: created[2],
      status: 'failed',
      error: 'bad text',
    });
  });

  it('reports another account’s, unknown and malformed ids as JOB_NOT_FOUND', async () => {
    for (const [account, jobId] of [
      [newAccount(), created[0]],
      [accountId, newId('job')],
      [accountId, 'job_not-a-ulid'],
      [accountId, '../../etc'],
      [accountId, created[0]?.replace('job_', 'upl_')],
    ] as const) {
      const error = await errorOf(
        harness.rpc.call(jobEndpoints.getJob, { accountId: account, jobId: jobId as string }),
      );
      expect(error.code).toBe('JOB_NOT_FOUND');
    }
  });

  it('names a queued text output kept only in storage by its key, for the gateway to read', async () => {
    const metrics = {
      inputSize: 11,
      outputSize: 13,
      compressionRatio: 0.846,
      operationsApplied: ['trim'],
      processingMs: 1,
    };
    const id = created[4] as string;
    const key = `results/${accountId}/${id}/result.txt`;
    await harness.db.collection(JOBS_COLLECTION).updateOne(
      { _id: id as never },
      {
        $set: {
          status: 'completed',
          completedAt: new Date(),
          result: {
            outputKey: key,
            outputText: null,
            metrics,
            expired: false,
          },
          eventPublished: true,
        },
      },
    );
    const job = await harness.rpc.call(jobEndpoints.getJob, { accountId, jobId: id });
    // Not the text: a reply is one NATS message, and such outputs run to megabytes.
    expect(job.result).toEqual({ outputTextKey: key, metrics });
  });
});

describe('getJob of a finished job', () => {
  const finish = (jobId: string, completedAt: Date) =>
    harness.db.collection(JOBS_COLLECTION).updateOne(
      { _id: jobId as never },
      {
        $set: {
          status: 'completed',
          completedAt,
          result: {
            outputKey: null,
            outputText: 'short',
            metrics: {
              inputSize: 11,
              outputSize: 5,
              compressionRatio: 0.455,
              operationsApplied: ['trim'],
              processingMs: 1,
            },
            expired: false,
          },
        },
      },
    );
  const owner = newAccount();
  const read = (jobId: string, account = owner) =>
    harness.rpc.call(jobEndpoints.getJob, { accountId: account, jobId });
  const findsOf = async (jobId: string, reads: () => Promise<unknown>) => {
    const recording = recordQueries(harness.mongo);
    await reads();
    recording.stop();
    return recording.queries.filter((query) => query.filter._id === jobId).length;
  };

  it('reads it from the database once, then from memory, for its own account only', async () => {
    const id = (await harness.createJob(textRequest(owner, 'queued text'))).job.id;
    // Not finished yet: read, not remembered, so the next read sees it finished.
    expect((await read(id)).status).toBe('created');
    await finish(id, new Date());
    const finds = await findsOf(id, async () => {
      for (let i = 0; i < 3; i += 1) {
        expect(await read(id)).toMatchObject({
          status: 'completed',
          result: { outputText: 'short' },
        });
      }
    });
    expect(finds).toBe(1);
    expect((await errorOf(read(id, newAccount()))).code).toBe('JOB_NOT_FOUND');
  });

  it('answers the read that follows its completion from memory: the completion stored it', async () => {
    const uploadId = harness.addUpload(owner, 'voice.mp3', MB, 'audio/mpeg');
    const id = (await harness.createJob(audioRequest(owner, uploadId))).job.id;
    expect((await harness.beginAttempt(id, 1)).action).toBe('run');
    expect(await harness.completeAttempt(id, 1)).toEqual({ accepted: true });
    let answer: unknown;
    expect(await findsOf(id, async () => (answer = await read(id)))).toBe(0);
    // Remembered as stored: the answer is the stored job's.
    expect(answer).toEqual(publicJobOf((await harness.storedJob(id))!));
    expect((await errorOf(read(id, newAccount()))).code).toBe('JOB_NOT_FOUND');
  });

  it('reads it every time once its result is close to the end of its retention', async () => {
    const id = (await harness.createJob(textRequest(owner, 'queued text'))).job.id;
    await finish(id, new Date(Date.now() - LIMITS.resultRetentionMs + 5 * 60 * 1000));
    const reads = async () => {
      await read(id);
      await read(id);
    };
    expect(await findsOf(id, reads)).toBe(2);
  });
});

describe('listJobs', () => {
  it('lists newest first with summaries exactly per publicJobSummary', async () => {
    const page = await list({});
    expect(page.items.map((item) => item.id)).toEqual([...created].reverse());
    expect(page.nextCursor).toBeNull();
    for (const item of page.items) expect(publicJobSummary.strict().parse(item)).toEqual(item);
    const [queuedText, audio, failedText, image] = page.items;
    expect(audio).toEqual({
      id: created[3],
      type: 'audio',
      status: 'created',
      name: 'voice.wav',
      createdAt: expect.any(String),
    });
    expect(image?.name).toBe('big.jpg');
    expect(failedText).toEqual({
      id: created[2],
      type: 'text',
      status: 'failed',
      error: 'bad text',
      createdAt: expect.any(String),
      completedAt: expect.any(String),
    });
    // Completed: only the three size metrics, no output text or URL.
    expect(queuedText).toEqual({
      id: created[4],
      type: 'text',
      status: 'completed',
      metrics: { inputSize: 11, outputSize: 13, compressionRatio: 0.846 },
      createdAt: expect.any(String),
      completedAt: expect.any(String),
    });
  });

  it('filters by type and status; video has no jobs', async () => {
    expect((await list({ type: 'audio' })).items.map((item) => item.id)).toEqual([
      created[3],
      created[0],
    ]);
    expect((await list({ status: 'failed' })).items.map((item) => item.id)).toEqual([created[2]]);
    expect((await list({ type: 'image', status: 'created' })).items.map((item) => item.id)).toEqual(
      [created[1]],
    );
    expect(await list({ type: 'video' })).toEqual({ items: [], nextCursor: null });
    expect((await list({}, newAccount())).items).toEqual([]);
  });

  it('pages with an opaque cursor until nextCursor is null', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await list({ limit: 2, ...(cursor === undefined ? {} : { cursor }) });
      seen.push(...page.items.map((item) => item.id));
      cursor = page.nextCursor ?? undefined;
      if (cursor !== undefined) expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      pages++;
    } while (cursor !== undefined);
    expect(pages).toBe(3);
    expect(seen).toEqual([...created].reverse());
  });

  it('rejects tampered, foreign and unknown cursors with VALIDATION_ERROR', async () => {
    const { nextCursor } = await list({ limit: 1 });
    const cursor = nextCursor as string;
    const decoded = Buffer.from(cursor, 'base64url').toString('utf8');
    const otherId = newId('job');
    const tampered = Buffer.from(`${otherId}${decoded.slice(otherId.length)}`).toString(
      'base64url',
    );
    for (const bad of [
      tampered,
      'garbage',
      `${cursor}x`,
      '!!!',
      Buffer.from(otherId).toString('base64url'),
    ]) {
      expect((await errorOf(list({ cursor: bad }))).code).toBe('VALIDATION_ERROR');
    }
    // A cursor belongs to its account and filters.
    expect((await errorOf(list({ cursor }, newAccount()))).code).toBe('VALIDATION_ERROR');
    expect((await errorOf(list({ cursor, type: 'audio' }))).code).toBe('VALIDATION_ERROR');
  });
});

describe('getJobEvent', () => {
  const eventOf = (jobId: string, account = accountId) =>
    harness.rpc.call(jobEndpoints.getJobEvent, { accountId: account, jobId });

  it('answers the event a finished job published, queued or inline, with one read and no write', async () => {
    // Another account, so the lists above keep their jobs.
    const owner = newAccount();
    const uploadId = harness.addUpload(owner, 'voice.wav', 1 * MB, 'audio/wav');
    const queued = (await harness.createJob(audioRequest(owner, uploadId))).job.id;
    await harness.beginAttempt(queued, 1);
    await harness.completeAttempt(queued, 1, `results/${owner}/${queued}/result.ogg`);
    const inlineFailed = created[2] as string;

    const recording = recordQueries(harness.mongo);
    const answers = [await eventOf(queued, owner), await eventOf(inlineFailed)];
    recording.stop();
    // The jobs' creations close their admissions with batched deletes that a loaded machine can
    // send inside this window; nothing else may come from anywhere else.
    const isAdmissionClose = (query: { command: string; collection: string }) =>
      query.command === 'delete' && query.collection === ADMISSIONS_COLLECTION;
    expect(recording.queries.filter((query) => !isAdmissionClose(query))).toEqual([
      { command: 'find', collection: JOBS_COLLECTION, filter: { _id: queued, accountId: owner } },
      { command: 'find', collection: JOBS_COLLECTION, filter: { _id: inlineFailed, accountId } },
    ]);

    const [completed, failed] = answers;
    expect(completed).toMatchObject({
      event: 'job.completed',
      jobId: queued,
      accountId: owner,
      status: 'completed',
      inline: false,
      result: { outputKey: `results/${owner}/${queued}/result.ogg` },
      error: null,
    });
    expect(failed).toMatchObject({
      event: 'job.failed',
      jobId: inlineFailed,
      status: 'failed',
      inline: true,
      result: null,
      error: 'bad text',
    });
    // Exactly what went out on EVENTS when each job became terminal.
    expect([completed, failed]).toEqual([
      (await harness.eventsFor(queued))[0]?.body,
      (await harness.eventsFor(inlineFailed))[0]?.body,
    ]);
  });

  it('reports unfinished, abandoned, unknown, malformed and another account’s jobs as JOB_NOT_FOUND', async () => {
    const abandoned = newId('job');
    await harness.db
      .collection(JOBS_COLLECTION)
      .insertOne({ _id: abandoned as never, accountId, abandonedAt: new Date() });
    const finished = created[2] as string;
    for (const [account, jobId] of [
      [accountId, created[0]], // created: not terminal
      [accountId, abandoned],
      [accountId, newId('job')],
      [accountId, 'job_not-a-ulid'],
      [accountId, 'job_\u0000'],
      [newAccount(), finished],
    ] as const) {
      const error = await errorOf(eventOf(jobId as string, account));
      expect(error.code, `${account} ${jobId}`).toBe('JOB_NOT_FOUND');
    }
  });
});
