import type { ServiceDefinition } from '@tamp/kit';
import { UPLOAD_INDEXES } from './adapters/upload-repository';
import { configSchema, uploadSettingsFrom } from './config';
import { startUploadService } from './service';

/** The upload service as a process runs it: its config, its connections, then its start. */
export const uploadService: ServiceDefinition<typeof configSchema> = {
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
};
