import { runPipelineWorker } from '@tamp/kit';
import { configSchema } from './config';
import { startWorkerImageService } from './service';

await runPipelineWorker({ pipeline: 'image', configSchema, start: startWorkerImageService });
