// First: tracing must patch libraries before anything loads them (kit/src/instrument.ts).
import '@tamp/kit/instrument';
import { runPipelineWorker } from '@tamp/kit';
import { configSchema, workerTextSettingsFrom } from './config';
import { startWorkerTextService } from './service';

await runPipelineWorker({
  pipeline: 'text',
  configSchema,
  settingsFrom: workerTextSettingsFrom,
  start: startWorkerTextService,
});
