import { runPipelineWorker } from '@tamp/kit';
import { configSchema } from './config';
import { startImageWorker } from './service';

await runPipelineWorker({ pipeline: 'image', configSchema, start: startImageWorker });
