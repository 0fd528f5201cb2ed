// First: tracing must patch libraries before anything loads them (kit/src/instrument.ts).
import '@tamp/kit/instrument';
import { runPipelineWorker } from '@tamp/kit';
import { configSchema, workerAudioSettingsFrom } from './config';
import { startWorkerAudioService } from './service';

await runPipelineWorker({
  pipeline: 'audio',
  configSchema,
  settingsFrom: workerAudioSettingsFrom,
  start: startWorkerAudioService,
});
