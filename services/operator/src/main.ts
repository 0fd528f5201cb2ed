import { runService } from '@tamp/kit';
import { configSchema } from './config';
import { startOperatorService } from './service';

await runService({
  name: 'operator',
  configSchema,
  async start({ config, logger, metrics, shutdown }) {
    const operator = await startOperatorService({ config, logger, metrics });
    if (operator !== null) shutdown.register('operator', () => operator.stop());
  },
});
