import { runPipelineWorker } from '@tamp/kit';
import { configSchema } from './config';
import { startWorkerTextService } from './service';

await runPipelineWorker({ pipeline: 'text', configSchema, start: startWorkerTextService });
