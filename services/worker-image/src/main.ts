// First: tracing must patch libraries before anything loads them (kit/src/instrument.ts).
import '@tamp/kit/instrument';
import { runPipelineWorker } from '@tamp/kit';
import { configSchema, workerImageSettingsFrom } from './config';
import { startWorkerImageService } from './service';

await runPipelineWorker({
  pipeline: 'image',
  configSchema,
  settingsFrom: workerImageSettingsFrom,
  start: startWorkerImageService,
});
