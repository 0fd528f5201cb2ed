// First: tracing must patch libraries before anything loads them (kit/src/instrument.ts).
import '@tamp/kit/instrument';
import { runService } from '@tamp/kit';
import { UPLOAD_INDEXES } from './adapters/upload-repository';
import { configSchema, uploadSettingsFrom } from './config';
import { startUploadService } from './service';

await runService({
  name: 'upload',
  configSchema,
  async start({ config, logger, connectNats, connectMongo, openObjectStore }) {
    const { rpc } = await connectNats(config);
    return startUploadService({
      rpc,
      db: await connectMongo(config, UPLOAD_INDEXES),
      store: await openObjectStore(config),
      logger,
      settings: uploadSettingsFrom(config),
    });
  },
});
