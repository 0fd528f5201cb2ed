import { type PipelineWorkerDependencies, startPipelineWorker } from '@tamp/kit';
import { configureSharp } from './adapters/sharp-runtime';
import type { Config } from './config';
import { createImageJobProcessor } from './job/image-job';

export interface ImageWorkerDependencies extends Omit<PipelineWorkerDependencies, 'config'> {
  config: PipelineWorkerDependencies['config'] &
    Pick<Config, 'IMAGE_MAX_PIXELS' | 'SHARP_CACHE_MB' | 'SHARP_CONCURRENCY'>;
}

/** Queued jobs from JOBS and inline requests on `work.image.inline`, one processJob for both. */
export function startImageWorker(deps: ImageWorkerDependencies) {
  const { config } = deps;
  const sharpState = configureSharp({
    cacheMemoryMb: config.SHARP_CACHE_MB,
    concurrency: config.SHARP_CONCURRENCY,
  });
  deps.logger.info(sharpState, 'sharp configured');
  if (!sharpState.jemalloc) {
    deps.logger.warn('not running on jemalloc; see recommendedImageWorkerEnv() in the README');
  }
  const processJob = createImageJobProcessor({
    store: deps.store,
    limitInputPixels: config.IMAGE_MAX_PIXELS,
  });
  return startPipelineWorker({ ...deps, pipeline: 'image', processJob });
}
