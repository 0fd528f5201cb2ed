import { type PipelineWorkerDependencies, startPipelineWorker } from '@tamp/kit';
import type { Config } from './config';
import { createTextJobProcessor } from './job/text-job';

export interface TextWorkerDependencies extends Omit<PipelineWorkerDependencies, 'config'> {
  config: PipelineWorkerDependencies['config'] & Pick<Config, 'TEXT_MAX_OUTPUT_TEXT_BYTES'>;
}

/** Queued jobs from JOBS and inline requests on `work.text.inline`, one processJob for both. */
export function startTextWorker(dependencies: TextWorkerDependencies) {
  const processJob = createTextJobProcessor({
    store: dependencies.store,
    maxOutputTextBytes: dependencies.config.TEXT_MAX_OUTPUT_TEXT_BYTES,
  });
  return startPipelineWorker({ ...dependencies, pipeline: 'text', processJob });
}
