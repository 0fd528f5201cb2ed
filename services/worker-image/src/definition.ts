import { pipelineWorkerService } from '@tamp/kit';
import { configSchema, workerImageSettingsFrom } from './config';
import { startWorkerImageService } from './service';

/** The image worker as a process runs it (kit's pipelineWorkerService). */
export const workerImageService = pipelineWorkerService({
  pipeline: 'image',
  configSchema,
  settingsFrom: workerImageSettingsFrom,
  start: startWorkerImageService,
});
