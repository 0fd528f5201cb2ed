import { objectStoreConfigFrom, runService } from '@tamp/kit';
import { UPLOAD_INDEXES } from './adapters/upload-repository';
import { configSchema } from './config';
import { startUploadService } from './service';

await runService({
  name: 'upload',
  configSchema,
  async start(context) {
    const { config } = context;
    const { rpc } = await context.connectNats(config.NATS_URL, config.NATS_NAMESPACE);
    const db = await context.connectMongo(config.MONGO_URL, config.MONGO_DATABASE, UPLOAD_INDEXES);
    const store = await context.openObjectStore(objectStoreConfigFrom(config));
    const upload = await startUploadService({
      rpc,
      db,
      store,
      logger: context.logger,
      sweepIntervalMs: config.UPLOAD_SWEEP_INTERVAL_MS,
    });
    // Registered after the connections, so it runs before they close.
    context.shutdown.register('upload', () => upload.stop());
  },
});
