import { pipelineWorkerService } from '@tamp/kit';
import { configSchema, workerTextSettingsFrom } from './config';
import { startWorkerTextService } from './service';

/** The text worker as a process runs it (kit's pipelineWorkerService). */
export const workerTextService = pipelineWorkerService({
  pipeline: 'text',
  configSchema,
  settingsFrom: workerTextSettingsFrom,
  start: startWorkerTextService,
});
