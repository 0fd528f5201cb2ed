import { runService } from '@tamp/kit';
import { configSchema } from './config';
import { startOperatorService } from './service';

await runService({
  name: 'operator',
  configSchema,
  start: ({ config, logger, metrics }) => startOperatorService({ config, logger, metrics }),
});
