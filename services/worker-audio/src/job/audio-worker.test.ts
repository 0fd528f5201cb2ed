import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { createTopology, type JobWorkMessage } from '@tamp/proto';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isolatedInfrastructure } from '../../../../test/support/infrastructure';
import {
  connectNats,
  type NatsConnection,
  ObjectStore,
  provisionTopology,
  Rpc,
} from '../../../kit/src';
import { JobServiceDouble } from '../../../kit/src/job-worker/job-service-double.test-support';
import { startAudioWorker } from '../service';

const infrastructure = isolatedInfrastructure();
const topology = createTopology(infrastructure.namespace);
const logger = pino({ level: 'silent' });
let nats: NatsConnection;
let store: ObjectStore;
let jobService: JobServiceDouble;
let worker: { stop(): Promise<void> };
let dir: string;

beforeAll(async () => {
  nats = await connectNats({ url: infrastructure.natsUrl, name: 'audio-worker-test', logger });
  await provisionTopology(nats, topology);
  store = new ObjectStore({ ...infrastructure.s3, bucket: infrastructure.bucket });
  await store.provision([]);
  jobService = new JobServiceDouble(nats, topology, 100);
  dir = await mkdtemp(join(tmpdir(), 'tamp-audio-worker-'));
  worker = await startAudioWorker({
    config: {
      WORKER_CONCURRENCY: 1,
      WORKER_INLINE_CONCURRENCY: 1,
      WORKER_TEMP_DIR: join(dir, 'work'),
      WORKER_STOP_GRACE_MS: 5_000,
      AUDIO_MAX_DURATION_SEC: 600,
      FFMPEG_PATH: undefined,
      FFPROBE_PATH: undefined,
    },
    nats,
    topology,
    rpc: new Rpc(nats, topology, logger),
    store,
    logger,
    metrics: new Registry(),
  });
});
afterAll(async () => {
  await worker?.stop();
  await jobService.close();
  const manager = await jetstreamManager(nats);
  for (const stream of Object.values(topology.streams)) await manager.streams.delete(stream.name);
  await nats.close();
});

describe('worker-audio', () => {
  it('runs a queued audio job into result.ogg with durations, loudness and usage', async () => {
    const wav = join(dir, 'tone.wav');
    await promisify(execFile)('ffmpeg', [
      '-v',
      'error',
      '-f',
      'lavfi',
      '-i',
      'sine=frequency=440:duration=3',
      '-ac',
      '1',
      wav,
    ]);
    const uploadKey = `uploads/acc_aud/${randomUUID()}`;
    await store.uploadFile(uploadKey, wav, 'audio/wav');
    const message: JobWorkMessage = {
      jobId: `job_${randomUUID()}`,
      accountId: 'acc_aud',
      createdAt: new Date().toISOString(),
      pipeline: 'audio',
      input: {
        kind: 'upload',
        uploadId: 'upl_a',
        key: uploadKey,
        size: 1,
        contentType: 'audio/wav',
        filename: 'tone.wav',
      },
      operations: [
        { type: 'normalize', params: { targetLevel: -16, peakNormalize: false } },
        { type: 'encode', params: { format: 'opus', bitrate: 24, channels: 1 } },
      ],
    };
    jobService.create(message);
    await jetstream(nats).publish(topology.subjects.jobs.audio, JSON.stringify(message), {
      msgID: message.jobId,
    });
    const job = await jobService.until(() => {
      const found = jobService.jobs.get(message.jobId);
      return (found?.status === 'completed' || found?.status === 'failed') && found;
    });
    expect(job.failures).toEqual([]);
    const completion = job.completions[0]!;
    expect(completion.outputKey).toBe(`results/acc_aud/${message.jobId}/result.ogg`);
    expect((await store.stat(completion.outputKey!))?.contentType).toBe('audio/ogg');
    expect(completion.metrics.operationsApplied).toEqual(['normalize', 'encode']);
    expect(completion.metrics.durationInSec).toBeCloseTo(3, 1);
    expect(completion.metrics.durationOutSec).toBeCloseTo(3, 1);
    expect(completion.usage).toEqual({
      inputBytes: completion.metrics.inputSize,
      audioSeconds: expect.closeTo(3, 1),
    });
    console.log('audio job metrics', JSON.stringify(completion.metrics));
  });
});
