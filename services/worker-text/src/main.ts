import { runPipelineWorker } from '@tamp/kit';
import { configSchema } from './config';
import { startTextWorker } from './service';

await runPipelineWorker({ pipeline: 'text', configSchema, start: startTextWorker });
