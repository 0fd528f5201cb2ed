import { randomUUID } from 'node:crypto';
import { inlineWorkReply, type JobWorkMessage } from '@tamp/proto';
import { ImageFixtures } from '@tamp/scripts/fixtures/images';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uploadWork, useWorkerHarness } from '../../../test/support/worker-harness';
import { configSchema, workerImageSettingsFrom } from '../src/config';
import { startWorkerImageService } from '../src/service';

let fixtures: ImageFixtures;
beforeAll(async () => {
  fixtures = await ImageFixtures.create();
});
afterAll(async () => {
  await fixtures?.cleanup();
});
const worker = useWorkerHarness({
  name: 'image-worker',
  concurrency: 2,
  start: ({ env, ...dependencies }) =>
    startWorkerImageService({
      ...dependencies,
      settings: workerImageSettingsFrom(configSchema.parse({ ...env, SHARP_CONCURRENCY: '1' })),
    }),
});

function imageJob(uploadKey: string): JobWorkMessage {
  return uploadWork({
    accountId: 'acc_img',
    pipeline: 'image',
    key: uploadKey,
    contentType: 'image/jpeg',
    filename: 'photo.jpg',
    operations: [
      { type: 'resize', params: { width: 400, fit: 'inside', position: 'centre' } },
      { type: 'encode', params: { format: 'webp', quality: 80, effort: 4 } },
    ],
  });
}

/** The job once settled, asserted to have ended `status`. */
async function settled(jobId: string, status: 'completed' | 'failed') {
  const job = await worker.harness.settled(jobId);
  expect(job.status).toBe(status);
  return job;
}

describe('worker-image', () => {
  it('runs a queued job: a real WebP result object under the deterministic key, with metrics and usage', async () => {
    const photo = await fixtures.photo({ width: 1200, height: 800 });
    const uploadKey = `uploads/acc_img/${randomUUID()}`;
    await worker.harness.store.uploadFile(uploadKey, photo, 'image/jpeg');
    const message = imageJob(uploadKey);
    await worker.harness.publish(message);
    const job = await settled(message.jobId, 'completed');

    const completion = job.completions[0]!;
    expect(completion.outputKey).toBe(`results/acc_img/${message.jobId}/result.webp`);
    expect(completion.outputText).toBeNull();
    const stored = await worker.harness.store.stat(completion.outputKey!);
    expect(stored?.contentType).toBe('image/webp');
    const metadata = await sharp(
      await worker.harness.store.getBuffer(completion.outputKey!),
    ).metadata();
    expect(metadata.format).toBe('webp');
    expect([metadata.width, metadata.height]).toEqual([400, 267]);
    const { metrics, usage } = completion;
    expect(metrics.outputSize).toBe(stored?.size);
    expect(metrics.compressionRatio).toBe(
      Math.round((metrics.inputSize / metrics.outputSize) * 1000) / 1000,
    );
    expect(metrics.operationsApplied).toEqual(['resize', 'encode']);
    expect(metrics).toMatchObject({ width: 400, height: 267 });
    expect(usage).toEqual({ inputBytes: metrics.inputSize, megapixels: 0.96 });
    console.log('image job metrics', JSON.stringify(metrics));
  });

  it('fails a corrupt image permanently on the first attempt (no retries)', async () => {
    const uploadKey = `uploads/acc_img/${randomUUID()}`;
    await worker.harness.store.putBuffer(
      uploadKey,
      Buffer.from('this is not a JPEG at all'),
      'image/jpeg',
    );
    const message = imageJob(uploadKey);
    await worker.harness.publish(message);
    const job = await settled(message.jobId, 'failed');
    expect(job.attempts).toEqual([1]);
    expect(job.failures).toHaveLength(1);
    expect(job.failures[0]?.permanent).toBe(true);
    expect(job.error).toMatch(/unsupported image format|corrupt/i);
  });

  it('retries when the input object is missing on attempt 1 and completes on attempt 2', async () => {
    const photo = await fixtures.photo({ width: 640, height: 480, seed: 3 });
    const uploadKey = `uploads/acc_img/${randomUUID()}`;
    const message = imageJob(uploadKey);
    await worker.harness.publish(message);
    await worker.harness.jobService.until(
      () => (worker.harness.jobService.jobs.get(message.jobId)?.failures.length ?? 0) >= 1,
    );
    await worker.harness.store.uploadFile(uploadKey, photo, 'image/jpeg');
    const job = await settled(message.jobId, 'completed');
    expect(job.failures.map((failure) => [failure.attempt, failure.permanent])).toEqual([
      [1, false],
    ]);
    expect(job.completions.map((completion) => completion.attempt)).toEqual([2]);
  });

  it('answers an inline request with the same processing', async () => {
    const photo = await fixtures.photo({ width: 500, height: 500, format: 'png', seed: 4 });
    const uploadKey = `uploads/acc_img/${randomUUID()}`;
    await worker.harness.store.uploadFile(uploadKey, photo, 'image/png');
    const message = imageJob(uploadKey);
    const { nats, topology } = worker.harness;
    const reply = await nats.request(topology.subjects.inline.image, JSON.stringify(message), {
      timeout: 10_000,
    });
    const body = inlineWorkReply.parse(reply.json());
    expect(body.status).toBe('completed');
    if (body.status !== 'completed') return;
    expect(body.outputKey).toBe(`results/acc_img/${message.jobId}/result.webp`);
    expect(
      (await sharp(await worker.harness.store.getBuffer(body.outputKey!)).metadata()).width,
    ).toBe(400);
  });
});
