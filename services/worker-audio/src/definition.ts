import { pipelineWorkerService } from '@tamp/kit';
import { configSchema, workerAudioSettingsFrom } from './config';
import { startWorkerAudioService } from './service';

/** The audio worker as a process runs it (kit's pipelineWorkerService). */
export const workerAudioService = pipelineWorkerService({
  pipeline: 'audio',
  configSchema,
  settingsFrom: workerAudioSettingsFrom,
  start: startWorkerAudioService,
});
