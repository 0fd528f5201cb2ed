import { type PipelineWorkerDependencies, startPipelineWorker } from '@tamp/kit';
import { createFfmpegRunner } from './adapters/ffmpeg-runner';
import { createAudioJobProcessor } from './application/audio-job';
import type { WorkerAudioSettings } from './config';

export interface WorkerAudioDependencies extends PipelineWorkerDependencies {
  settings: WorkerAudioSettings;
}

/** Queued audio jobs only: audio is never processed inline. */
export function startWorkerAudioService(deps: WorkerAudioDependencies) {
  const { settings } = deps;
  const audio = createFfmpegRunner({
    maxDurationSec: settings.maxDurationSec,
    ...(settings.ffmpegPath && { ffmpegPath: settings.ffmpegPath }),
    ...(settings.ffprobePath && { ffprobePath: settings.ffprobePath }),
  });
  const processJob = createAudioJobProcessor({ store: deps.store, audio });
  return startPipelineWorker({ ...deps, settings: settings.worker, pipeline: 'audio', processJob });
}
