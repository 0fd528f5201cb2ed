// First: tracing must patch libraries before anything loads them (kit/src/instrument.ts).
import '@tamp/kit/instrument';
import { runService } from '@tamp/kit';
import { jobService } from './definition';

await runService(jobService);
