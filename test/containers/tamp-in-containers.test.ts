import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { creditCost } from '@tamp/proto';
import { photo, speechWav } from '@tamp/scripts/fixtures/media';
import { generateLongWav, probeDurationSec } from '@tamp/scripts/fixtures/speech';
import { pollUntil } from '@tamp/scripts/infra/kubernetes/processes';
import { provisionTools } from '@tamp/scripts/infra/provision';
import {
  type StartedTampContainer,
  TampContainer,
  type WebhookReceiver,
} from '@tamp/testcontainers';
import { MongoClient } from 'mongodb';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyTampDelivery } from '../../services/webhook/examples/verify-delivery';
import { expectCompletedOnceAfterOneCrash, jobDocument } from '../support/exactly-once';
import { apiRequest, finishedJob, type PublicApi, uploadFile } from '../support/stack';

/**
 * Tamp as @tamp/testcontainers runs it: NATS, FerretDB, MinIO and every Tamp service, each in a
 * container from the images `npm run images` builds, on the engine of the project's setup
 * (podman here; test/setup/container-engine.ts), used only through the gateway container as a
 * customer's test would: a presigned upload, an image, a text and an audio job with their
 * results downloaded, a webhook delivered to a receiver container, and a worker container
 * killed mid-job.
 */

interface Job {
  id: string;
  status: string;
  result?: { outputUrl?: string; outputText?: string };
}

let tamp: StartedTampContainer;
let receiver: WebhookReceiver;
let client: PublicApi;
let mongo: MongoClient;
let scratch: string;

beforeAll(async () => {
  // The fixtures' speech and the test's probe of the audio result (espeak-ng, ffmpeg).
  await provisionTools('speech');
  scratch = await mkdtemp(join(tmpdir(), 'tamp-containers-test-'));
  const started = Date.now();
  tamp = await new TampContainer().start();
  console.log(
    `Tamp ready in ${((Date.now() - started) / 1000).toFixed(1)} s (${tamp.networkMode} network)`,
  );
  client = {
    api: (method, path, init) => apiRequest(tamp.baseUrl, method, path, init),
    logs: () => tamp.logs(),
  };
  receiver = await tamp.startWebhookReceiver();
  mongo = new MongoClient(tamp.dependencies.mongoUrl, { directConnection: true });
}, 600_000);

afterAll(async () => {
  await mongo?.close();
  await tamp?.stop();
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
}, 120_000);

async function download(url: string): Promise<Buffer> {
  // Signed for the address the test reaches MinIO at.
  expect(new URL(url).origin).toBe(tamp.dependencies.s3.endpoint);
  const response = await fetch(url);
  expect(response.status).toBe(200);
  return Buffer.from(await response.arrayBuffer());
}

async function create(path: string, body: unknown): Promise<{ status: number; job: Job }> {
  const response = await client.api<Job>('POST', path, { token: tamp.apiKey, body });
  expect(response.body.data, JSON.stringify(response.body)).toBeDefined();
  return { status: response.status, job: response.body.data! };
}

const db = () => mongo.db('tamp');

async function credits(): Promise<number> {
  const response = await apiRequest<{ credits: { available: number } }>(
    tamp.adminUrl,
    'GET',
    `/admin/accounts/${tamp.accountId}`,
    { token: tamp.adminToken },
  );
  return response.body.data!.credits.available;
}

describe('Tamp in containers (@tamp/testcontainers)', () => {
  it('uploads through a presigned URL and runs an image job', async () => {
    const imageId = await uploadFile(client, tamp.apiKey, 'photo.jpg', await photo(1600, 1200));
    const created = await create('/v1/image', { imageId, preset: 'thumbnail' });
    expect([200, 202]).toContain(created.status);
    const job = await finishedJob<Job>(client, tamp.apiKey, created.job.id);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    const thumbnail = await sharp(await download(job.result!.outputUrl!)).metadata();
    expect(thumbnail.format).toBe('webp');
    expect(Math.max(thumbnail.width!, thumbnail.height!)).toBeLessThan(1600);
  }, 300_000);

  it('runs a text job', async () => {
    const created = await create('/v1/text', {
      text: 'Hello   containers!\n\n\n\nBye.',
      preset: 'medium',
    });
    const job = await finishedJob<Job>(client, tamp.apiKey, created.job.id);
    expect(job.result?.outputText).toBe('Hello containers!\n\nBye.');
  }, 120_000);

  it('runs an audio job on the queue and serves its result', async () => {
    const audioId = await uploadFile(
      client,
      tamp.apiKey,
      'speech.wav',
      await speechWav('Tamp runs in containers now.'),
    );
    const created = await create('/v1/audio', { audioId, preset: 'podcast' });
    expect(created.status).toBe(202);
    const job = await finishedJob<Job>(client, tamp.apiKey, created.job.id);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    const encoded = join(scratch, 'result-audio');
    await writeFile(encoded, await download(job.result!.outputUrl!));
    expect(await probeDurationSec(encoded)).toBeGreaterThan(1);
  }, 300_000);

  it('delivers a signed webhook to a receiver container', async () => {
    const created = await create('/v1/text', {
      text: `Hello   receiver ${Date.now()}`,
      preset: 'chill',
      webhookUrl: receiver.url,
    });
    expect(created.status).toBe(202);
    const delivery = await receiver.waitForDelivery(
      (candidate) => candidate.body.includes(created.job.id),
      120_000,
    );
    const verification = verifyTampDelivery(
      Buffer.from(delivery.body),
      delivery.headers,
      tamp.webhookSecret,
    );
    expect(verification).toMatchObject({
      ok: true,
      event: { event: 'job.completed', job: { id: created.job.id, status: 'completed' } },
    });
  }, 300_000);

  it('completes a job once, charged once, when its worker container is killed mid-job', async () => {
    const wav = join(scratch, 'long.wav');
    await generateLongWav(wav, 60);
    const bytes = await readFile(wav);
    const audioId = await uploadFile(client, tamp.apiKey, 'long.wav', bytes);
    const before = await credits();
    const created = await create('/v1/audio', {
      audioId,
      preset: 'lecture',
      webhookUrl: receiver.url,
    });
    expect(created.status).toBe(202);
    const jobId = created.job.id;
    await pollUntil(
      'the audio job to be processing',
      async () => {
        const read = await client.api<Job>('GET', `/v1/jobs/${jobId}`, { token: tamp.apiKey });
        return read.body.data?.status === 'processing' ? true : undefined;
      },
      120_000,
      200,
    );
    await tamp.kill('worker-audio');
    // Killed while running: otherwise this proves nothing.
    expect(await jobDocument(db(), jobId)).toMatchObject({ status: 'processing', attempts: 1 });
    // The container comes back as a replaced pod would, and gets the job again once the
    // killed one's lease on it runs out.
    await tamp.service('worker-audio').restart();

    const job = await finishedJob<Job>(client, tamp.apiKey, jobId);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    await expectCompletedOnceAfterOneCrash(db(), jobId, receiver.deliveries);
    expect(before - (await credits())).toBe(creditCost('audio', bytes.byteLength));
  }, 600_000);
});
