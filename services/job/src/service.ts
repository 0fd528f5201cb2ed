import type { Db, JobOutcomeMetrics, Logger, NatsConnection, ObjectStore, Rpc } from '@tamp/kit';
import type { Topology } from '@tamp/proto';
import { AdmissionRepository } from './adapters/admission-repository';
import { IdempotencyRepository } from './adapters/idempotency-repository';
import { JobRepository } from './adapters/job-repository';
import { JobMessaging } from './adapters/messaging';
import { serveJobEndpoints } from './api/endpoints';
import { FinishedJobs } from './application/finished-jobs';
import { JobAdmission } from './application/job-admission';
import { JobAttempts } from './application/job-attempts';
import { JobCreation } from './application/job-creation';
import { JobReads } from './application/job-reads';
import type { JobSettings } from './application/job-settings';
import { Settlement } from './application/settlement';
import { Sweeper, type SweepReport } from './application/sweeper';
import { UnfinishedCreations } from './application/unfinished-creations';

export interface JobServiceDependencies {
  db: Db;
  /** Pooled connection for public reads (see ServiceContext.connectMongoForReads). */
  readDb?: Db;
  nats: NatsConnection;
  topology: Topology;
  rpc: Rpc;
  store: ObjectStore;
  logger: Logger;
  /** From jobSettingsFrom (config.ts); tests change single values. */
  settings: JobSettings;
  /** The service's notion of now (tests move it to reach retention or staleness). */
  clock?: () => Date;
  /** Jitter source of the retry backoff; Math.random unless a test fixes it. */
  random?: () => number;
  metrics?: JobOutcomeMetrics;
}

export interface RunningJobService {
  /** Stops serving and the sweepers; connections belong to the caller. */
  stop(): Promise<void>;
  /** Runs every sweeper once as of `now` (also run on a timer). */
  sweep(now?: Date): Promise<SweepReport>;
}

/**
 * The repositories and the settlement the service's parts share, wired once: startJobService
 * builds on them, and a test builds a second set of sweepers from them (with one replaced).
 */
export function jobServiceCore(dependencies: JobServiceDependencies) {
  const { db, nats, topology, rpc, logger } = dependencies;
  const clock = dependencies.clock ?? (() => new Date());
  const jobs = new JobRepository(db);
  const claims = new IdempotencyRepository(db);
  const admissions = new AdmissionRepository(db);
  const messaging = new JobMessaging(nats, topology, logger, rpc);
  const finished = new FinishedJobs();
  const settlement = new Settlement(jobs, messaging, rpc, logger, finished, dependencies.metrics);
  const unfinished = new UnfinishedCreations({
    jobs,
    admissions,
    claims,
    messaging,
    settlement,
    rpc,
    clock,
    logger,
  });
  return { clock, jobs, claims, admissions, messaging, settlement, unfinished, finished };
}

/** Serves `jobEndpoints` on NATS and runs the sweepers. Indexes: JOB_INDEXES (main.ts). */
export async function startJobService(
  dependencies: JobServiceDependencies,
): Promise<RunningJobService> {
  const { db, rpc, store, logger, settings } = dependencies;
  const core = jobServiceCore(dependencies);
  const { clock, jobs, claims, admissions, messaging, settlement, unfinished, finished } = core;
  const reads = new JobReads(
    new JobRepository(dependencies.readDb ?? db),
    store,
    settings.cursorSecret,
    admissions,
    finished,
  );
  const admission = new JobAdmission({
    jobs,
    admissions,
    claims,
    messaging,
    reads,
    settlement,
    rpc,
    settings,
    clock,
    logger,
  });
  const creation = new JobCreation(
    admission,
    unfinished,
    jobs,
    admissions,
    claims,
    reads,
    settings,
    clock,
  );
  const attempts = new JobAttempts(jobs, settlement, settings, clock, logger, dependencies.random);
  const sweeper = new Sweeper({ ...core, store, settings, logger });

  const endpoints = await serveJobEndpoints(rpc, { creation, reads, attempts });
  sweeper.start(settings.sweepIntervalMs);
  return {
    async stop() {
      // Intake stops at once; a sweep pass under way ends at its next query meanwhile.
      await Promise.all([sweeper.stop(), endpoints.stop()]);
      // Write-behind confirmations of the last requests, so a clean stop leaves no redo.
      await Promise.all([jobs.flush(), admissions.flush()]);
    },
    sweep: (now) => sweeper.sweep(now),
  };
}
