import { runPipelineWorker } from '@tamp/kit';
import { configSchema } from './config';
import { startAudioWorker } from './service';

await runPipelineWorker({ pipeline: 'audio', configSchema, start: startAudioWorker });
