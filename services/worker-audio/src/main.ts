import { runPipelineWorker } from '@tamp/kit';
import { configSchema } from './config';
import { startWorkerAudioService } from './service';

await runPipelineWorker({ pipeline: 'audio', configSchema, start: startWorkerAudioService });
