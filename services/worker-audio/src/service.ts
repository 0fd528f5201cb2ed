import { hostname } from 'node:os';
import { startJobWorker } from '@tamp/kit';
import type { Topology } from '@tamp/proto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { NatsConnection, ObjectStore, Rpc } from '../../kit/src';
import { createFfmpegRunner } from './adapters/ffmpeg-runner';
import type { Config } from './config';
import { createAudioJobProcessor } from './job/audio-job';

export const SERVICE_NAME = 'worker-audio';

export interface AudioWorkerDependencies {
  config: Pick<
    Config,
    | 'WORKER_CONCURRENCY'
    | 'WORKER_TEMP_DIR'
    | 'WORKER_STOP_GRACE_MS'
    | 'AUDIO_MAX_DURATION_SEC'
    | 'FFMPEG_PATH'
    | 'FFPROBE_PATH'
  >;
  nats: NatsConnection;
  topology: Topology;
  rpc: Rpc;
  store: ObjectStore;
  logger: Logger;
  metrics: Registry;
}

/** Queued audio jobs only: audio is never processed inline. */
export async function startAudioWorker(deps: AudioWorkerDependencies) {
  const { config } = deps;
  const audio = createFfmpegRunner({
    maxDurationSec: config.AUDIO_MAX_DURATION_SEC,
    ...(config.FFMPEG_PATH && { ffmpegPath: config.FFMPEG_PATH }),
    ...(config.FFPROBE_PATH && { ffprobePath: config.FFPROBE_PATH }),
  });
  const queued = await startJobWorker({
    rpc: deps.rpc,
    nats: deps.nats,
    topology: deps.topology,
    consumer: SERVICE_NAME,
    workerName: `${SERVICE_NAME}/${hostname()}/${process.pid}`,
    concurrency: config.WORKER_CONCURRENCY,
    processJob: createAudioJobProcessor({ store: deps.store, audio }),
    logger: deps.logger,
    metrics: deps.metrics,
    tempDir: config.WORKER_TEMP_DIR,
    stopGraceMs: config.WORKER_STOP_GRACE_MS,
  });
  return { stop: () => queued.stop() };
}
