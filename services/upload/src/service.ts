import type { Db, Logger, ObjectStore, Rpc } from '@tamp/kit';
import { ServiceError, uploadEndpoints } from '@tamp/proto';
import { UploadRepository } from './adapters/upload-repository';
import { UploadStorage } from './adapters/upload-storage';
import { UploadSweeper } from './sweeper';
import { type Clock, Uploads } from './uploads';

export const DEFAULT_SWEEP_INTERVAL_MS = 60 * 60 * 1000;

export interface UploadDependencies {
  rpc: Rpc;
  /** The database holding `uploads`, with UPLOAD_INDEXES provisioned. */
  db: Db;
  store: ObjectStore;
  logger: Logger;
  /** Injectable so tests can move time past the 24-hour lifetime and the retention. */
  clock?: Clock;
  sweepIntervalMs?: number;
}

export interface RunningUpload {
  /** One sweeper pass now (tests, operators); returns how many uploads were removed. */
  sweep(): Promise<number>;
  /** Stops serving and sweeping and waits for the requests and sweep in flight. */
  stop(): Promise<void>;
}

/** Serves `svc.upload.*` and runs the sweeper. Used by main.ts and by the tests, in-process. */
export function startUpload(dependencies: UploadDependencies): RunningUpload {
  const clock = dependencies.clock ?? (() => new Date());
  const logger = dependencies.logger;
  const repository = new UploadRepository(dependencies.db);
  const storage = new UploadStorage(dependencies.store);
  const uploads = new Uploads(repository, storage, clock);
  const sweeper = new UploadSweeper(repository, storage, clock, logger);
  const inFlight = new Set<Promise<unknown>>();

  /** Tracks each request so stop() can wait for it, and logs dependency failures with cause. */
  const track = <Result>(endpoint: string, work: () => Promise<Result>): Promise<Result> => {
    const running = work().catch((error: unknown) => {
      if (error instanceof ServiceError && error.code === 'UNAVAILABLE') {
        logger.warn({ err: error.cause ?? error, endpoint }, 'dependency unavailable');
      }
      throw error;
    });
    const settled = running.then(
      () => undefined,
      () => undefined,
    );
    inFlight.add(settled);
    void settled.then(() => inFlight.delete(settled));
    return running;
  };

  const subscriptions = [
    dependencies.rpc.serve(uploadEndpoints.createUpload, (request) =>
      track('create-upload', () => uploads.create(request)),
    ),
    dependencies.rpc.serve(uploadEndpoints.consumeUpload, (request) =>
      track('consume-upload', () => uploads.consume(request)),
    ),
  ];

  let sweeping: Promise<number> | undefined;
  const sweep = (): Promise<number> => {
    // One pass at a time; a caller arriving during a pass shares its result.
    sweeping ??= sweeper.sweep().finally(() => {
      sweeping = undefined;
    });
    return sweeping;
  };
  const timer = setInterval(() => {
    sweep().catch((error: unknown) => logger.error({ err: error }, 'upload sweep failed'));
  }, dependencies.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS);
  timer.unref();

  let stopping: Promise<void> | undefined;
  return {
    sweep,
    stop() {
      stopping ??= (async () => {
        clearInterval(timer);
        // Drain rather than unsubscribe: requests already delivered are still answered.
        await Promise.allSettled(subscriptions.map((subscription) => subscription.drain()));
        await Promise.allSettled([...inFlight, sweeping]);
      })();
      return stopping;
    },
  };
}
