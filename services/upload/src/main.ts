import { runService } from '@tamp/kit';
import { UPLOAD_INDEXES } from './adapters/upload-repository';
import { configSchema } from './config';
import { startUploadService } from './service';

await runService({
  name: 'upload',
  configSchema,
  async start(context) {
    const { config } = context;
    const { rpc } = await context.connectNats(config);
    return startUploadService({
      rpc,
      db: await context.connectMongo(config, UPLOAD_INDEXES),
      store: await context.openObjectStore(config),
      logger: context.logger,
      sweepIntervalMs: config.UPLOAD_SWEEP_INTERVAL_MS,
    });
  },
});
