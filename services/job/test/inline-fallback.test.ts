import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createMetricsRegistry,
  type InlineWorkServer,
  type JobWorker,
  PermanentJobError,
  type ProcessJob,
  Rpc,
  serveInlineWork,
  startJobWorker,
} from '@tamp/kit';
import { jobEndpoints } from '@tamp/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertStaysTrue } from '../../../test/support/stays-true';
import { CONFIRMED, imageRequest, JobHarness, newAccount } from './harness';

/**
 * The whole inline → queue fallback over the wire: the real job service, and kit's real inline
 * server and queued worker running one `processImage` that reads its input from real storage.
 */
const harness = new JobHarness();
const accountId = newAccount();
const tempDir = join(tmpdir(), 'tamp-inline-fallback-test');
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const OUTPUT = Buffer.from('RIFF....WEBPVP8 fake image bytes');

/** Every run of `processImage`, in order. */
const runs: { jobId: string; mode: 'inline' | 'queued'; attempt: number }[] = [];

const processImage: ProcessJob = async (work, { workspace, mode, attempt }) => {
  runs.push({ jobId: work.jobId, mode, attempt });
  if (work.input.kind !== 'upload') throw new PermanentJobError('Only uploads are processed');
  const inputPath = join(await workspace(), 'input');
  // A MissingObjectError while the upload is not readable yet: retryable, as in the real workers.
  await harness.store.downloadToFile(work.input.key, inputPath);
  const input = await readFile(inputPath);
  if (!input.subarray(0, PNG_SIGNATURE.length).equals(PNG_SIGNATURE)) {
    throw new PermanentJobError('The file is not a valid PNG image');
  }
  const outputKey = `results/${work.accountId}/${work.jobId}/result.webp`;
  await harness.store.putBuffer(outputKey, OUTPUT, 'image/webp');
  return {
    outputKey,
    outputText: null,
    metrics: {
      inputSize: input.length,
      outputSize: OUTPUT.length,
      compressionRatio: 1,
      operationsApplied: ['encode'],
      processingMs: 1,
    },
    usage: { inputBytes: input.length, megapixels: 0.0001 },
  };
};

/** Shared by the inline server and the queued worker, as in a worker process. */
const metrics = createMetricsRegistry('worker-image');
let inlineServer: InlineWorkServer;
let queuedWorker: JobWorker | undefined;

beforeAll(async () => {
  await harness.start();
  inlineServer = serveInlineWork({
    rpc: new Rpc(harness.peerNats, harness.topology, harness.logger),
    subject: harness.topology.subjects.inline.image,
    queue: 'worker-image',
    processJob: processImage,
    logger: harness.logger,
    metrics,
    concurrency: 4,
    tempDir,
  });
  await harness.peerNats.flush();
});
afterAll(async () => {
  await Promise.all([queuedWorker?.stop({ graceMs: 2_000 }), inlineServer?.stop({ graceMs: 0 })]);
  await harness.stop();
  await rm(tempDir, { recursive: true, force: true });
});

/** Started on demand, so a test can look at a queued job before any worker takes it. */
async function startQueuedWorker(): Promise<void> {
  queuedWorker ??= await startJobWorker({
    rpc: harness.rpc,
    nats: harness.peerNats,
    topology: harness.topology,
    consumer: 'worker-image',
    workerName: 'worker-image/test',
    concurrency: 1,
    processJob: processImage,
    logger: harness.logger,
    metrics,
    tempDir,
    fetchExpiresMs: 1_000,
  });
}

/** An image upload small enough for the inline path; its object is stored only if `bytes` is given. */
async function upload(bytes?: Buffer): Promise<string> {
  const uploadId = harness.addUpload(accountId, 'photo.png', bytes?.length ?? 2_000, 'image/png');
  const key = harness.uploads.get(uploadId)?.key as string;
  if (bytes !== undefined) await harness.store.putBuffer(key, bytes, 'image/png');
  return uploadId;
}

const stored = (jobId: string) => harness.storedJob(jobId);
const runsOf = (jobId: string) =>
  runs.filter((run) => run.jobId === jobId).map(({ mode, attempt }) => ({ mode, attempt }));
const refundsOf = (jobId: string) => harness.refundCalls.filter((call) => call.jobId === jobId);
const reservationsOf = (jobId: string) =>
  harness.reserveCalls.filter((call) => call.jobId === jobId);

describe('an inline failure', () => {
  it('that is transient queues the job (202), which the queued worker then completes, unrefunded', async () => {
    const uploadId = await upload();
    const request = imageRequest(accountId, uploadId);

    const answer = await harness.createJob(request);

    expect(answer).toEqual({ httpStatus: 202, job: { id: request.jobId, status: 'created' } });
    expect(runsOf(request.jobId)).toEqual([{ mode: 'inline', attempt: 1 }]);
    expect(await stored(request.jobId)).toMatchObject({
      status: 'created',
      inline: false,
      attempts: 0,
      refundPending: false,
    });
    expect(await harness.workFor(request.jobId)).toHaveLength(1);

    // Storage catches up; the queued path takes the job from there with all its attempts.
    const key = harness.uploads.get(uploadId)?.key as string;
    await harness.store.putBuffer(
      key,
      Buffer.concat([PNG_SIGNATURE, Buffer.alloc(100)]),
      'image/png',
    );
    await startQueuedWorker();
    await expect
      .poll(async () => (await harness.eventsFor(request.jobId)).length, { timeout: 20_000 })
      .toBe(1);

    expect(await stored(request.jobId)).toMatchObject({
      status: 'completed',
      inline: false,
      attempts: 1,
      refundPending: false,
    });
    expect(runsOf(request.jobId)).toEqual([
      { mode: 'inline', attempt: 1 },
      { mode: 'queued', attempt: 1 },
    ]);
    const job = await harness.rpc.call(jobEndpoints.getJob, { accountId, jobId: request.jobId });
    expect(job.status).toBe('completed');
    expect(Buffer.from(await (await fetch(job.result?.outputUrl as string)).arrayBuffer())).toEqual(
      OUTPUT,
    );
    const events = await harness.eventsFor(request.jobId);
    expect(events.map((event) => event.body)).toEqual([
      expect.objectContaining({ event: 'job.completed', inline: false }),
    ]);
    expect(reservationsOf(request.jobId)).toHaveLength(1);
    expect(refundsOf(request.jobId)).toHaveLength(0);
  });

  it('that is permanent fails the job at once (200 failed), refunded once, never queued', async () => {
    await startQueuedWorker();
    const request = imageRequest(accountId, await upload(Buffer.from('GIF89a, not a PNG')));

    const answer = await harness.createJob(request);

    expect(answer).toEqual({
      httpStatus: 200,
      job: { id: request.jobId, status: 'failed', error: 'The file is not a valid PNG image' },
    });
    await expect
      .poll(() => stored(request.jobId), CONFIRMED)
      .toMatchObject({
        status: 'failed',
        inline: true,
        attempts: 1,
        refundPending: false,
      });
    // Its event published, the creation is closed.
    await expect.poll(() => harness.admissionOpen(request.jobId), CONFIRMED).toBe(false);
    expect(await harness.workFor(request.jobId)).toHaveLength(0);
    expect(refundsOf(request.jobId)).toHaveLength(1);
    // Nothing more may happen to the job. A (wrongly) queued copy would be picked up by the
    // queued worker within 1.5 s: watched that long, the run, the refund and the event stay one.
    await assertStaysTrue(
      async () => {
        expect(runsOf(request.jobId)).toEqual([{ mode: 'inline', attempt: 1 }]);
        expect(refundsOf(request.jobId)).toHaveLength(1);
        expect((await harness.eventsFor(request.jobId)).map((event) => event.body.event)).toEqual([
          'job.failed',
        ]);
      },
      { forMs: 1_500, intervalMs: 250, what: 'nothing more happening to the failed job' },
    );
  });
});
