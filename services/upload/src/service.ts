import type { Db, Logger, ObjectStore, Rpc } from '@tamp/kit';
import { UploadRepository } from './adapters/upload-repository';
import { UploadStorage } from './adapters/upload-storage';
import { serveUploadEndpoints } from './api/endpoints';
import { UploadSweeper } from './application/upload-sweeper';
import { type Clock, Uploads } from './application/uploads';
import type { UploadSettings } from './config';

export interface UploadDependencies {
  rpc: Rpc;
  /** The database holding `uploads`, with UPLOAD_INDEXES provisioned. */
  db: Db;
  store: ObjectStore;
  logger: Logger;
  /** Injectable so tests can move time past the 24-hour lifetime and the retention. */
  clock?: Clock;
  /** From uploadSettingsFrom (config.ts); tests change single values. */
  settings: UploadSettings;
}

export interface RunningUpload {
  /** One sweeper pass now (tests, operators); returns how many uploads were removed. */
  sweep(): Promise<number>;
  /** Stops serving and sweeping and waits for the requests and sweep in flight. */
  stop(): Promise<void>;
}

/** Serves `svc.upload.*` and runs the sweeper. Used by main.ts and by the tests, in-process. */
export async function startUploadService(dependencies: UploadDependencies): Promise<RunningUpload> {
  const { logger } = dependencies;
  const clock = dependencies.clock ?? (() => new Date());
  const repository = new UploadRepository(dependencies.db);
  const storage = new UploadStorage(dependencies.store, logger);
  const sweeper = new UploadSweeper(repository, storage, clock, logger);
  const endpoints = await serveUploadEndpoints(
    dependencies.rpc,
    new Uploads(repository, storage, clock),
  );
  sweeper.start(dependencies.settings.sweepIntervalMs);

  let stopping: Promise<void> | undefined;
  return {
    sweep: () => sweeper.sweep(),
    stop() {
      stopping ??= Promise.all([endpoints.stop(), sweeper.stop()]).then(() => undefined);
      return stopping;
    },
  };
}
