import { type PipelineWorkerDependencies, startPipelineWorker } from '@tamp/kit';
import { createFfmpegRunner } from './adapters/ffmpeg-runner';
import { createAudioJobProcessor } from './application/audio-job';
import type { Config } from './config';

export interface WorkerAudioDependencies extends Omit<PipelineWorkerDependencies, 'config'> {
  config: PipelineWorkerDependencies['config'] &
    Pick<Config, 'AUDIO_MAX_DURATION_SEC' | 'FFMPEG_PATH' | 'FFPROBE_PATH'>;
}

/** Queued audio jobs only: audio is never processed inline. */
export function startWorkerAudioService(deps: WorkerAudioDependencies) {
  const { config } = deps;
  const audio = createFfmpegRunner({
    maxDurationSec: config.AUDIO_MAX_DURATION_SEC,
    ...(config.FFMPEG_PATH && { ffmpegPath: config.FFMPEG_PATH }),
    ...(config.FFPROBE_PATH && { ffprobePath: config.FFPROBE_PATH }),
  });
  const processJob = createAudioJobProcessor({ store: deps.store, audio });
  return startPipelineWorker({ ...deps, pipeline: 'audio', processJob });
}
