import type { Db, JobOutcomeMetrics, Logger, NatsConnection, ObjectStore, Rpc } from '@tamp/kit';
import { jobEndpoints, LIMITS, type Topology } from '@tamp/proto';
import { AdmissionRepository } from './adapters/admission-repository';
import { IdempotencyRepository } from './adapters/idempotency-repository';
import { JobRepository } from './adapters/job-repository';
import { JobMessaging } from './adapters/messaging';
import { Sweeper, type SweepReport } from './adapters/sweeper';
import { JobAttempts } from './attempts';
import { DEFAULT_JOB_SETTINGS } from './config';
import type { JobContext, JobSettings } from './context';
import { JobCreation } from './creation';
import { JobReads } from './reads';
import { Settlement } from './settlement';

export interface JobServiceDependencies {
  db: Db;
  /** Pooled connection for public reads (see ServiceContext.connectMongoForReads). */
  readDb?: Db;
  nats: NatsConnection;
  topology: Topology;
  rpc: Rpc;
  store: ObjectStore;
  logger: Logger;
  settings?: Partial<JobSettings>;
  /** The service's notion of now (tests move it to reach retention or staleness). */
  clock?: () => Date;
  metrics?: JobOutcomeMetrics;
}

export interface RunningJobService {
  /** Stops serving and the sweepers; connections belong to the caller. */
  stop(): Promise<void>;
  /** Runs every sweeper once as of `now` (also run on a timer). */
  sweep(now?: Date): Promise<SweepReport>;
}

/** Serves `jobEndpoints` on NATS and runs the sweepers. Indexes: JOB_INDEXES (main.ts). */
export async function startJobService(
  dependencies: JobServiceDependencies,
): Promise<RunningJobService> {
  const { db, nats, topology, rpc, store, logger } = dependencies;
  const context: JobContext = {
    jobs: new JobRepository(db),
    jobReads: new JobRepository(dependencies.readDb ?? db),
    claims: new IdempotencyRepository(db),
    admissions: new AdmissionRepository(db),
    messaging: new JobMessaging(nats, topology, logger),
    rpc,
    store,
    logger,
    settings: { ...DEFAULT_JOB_SETTINGS, ...dependencies.settings },
    clock: dependencies.clock ?? (() => new Date()),
    metrics: dependencies.metrics,
  };
  const settlement = new Settlement(context);
  const reads = new JobReads(context);
  const creation = new JobCreation(context, reads, settlement);
  const attempts = new JobAttempts(context, settlement);
  const sweeper = new Sweeper(context, settlement);

  const subscriptions = [
    rpc.serve(jobEndpoints.createJob, (request, { deadline }) =>
      creation.create(request, deadline ?? Date.now() + LIMITS.createJobBudgetMs),
    ),
    rpc.serve(jobEndpoints.getJob, ({ accountId, jobId }) => reads.getJob(accountId, jobId)),
    rpc.serve(jobEndpoints.listJobs, (request) => reads.listJobs(request)),
    rpc.serve(jobEndpoints.beginAttempt, ({ jobId, attempt, worker }) =>
      attempts.begin(jobId, attempt, worker),
    ),
    rpc.serve(jobEndpoints.completeJob, (report) => attempts.complete(report)),
    rpc.serve(jobEndpoints.handBackAttempt, ({ jobId, attempt }) =>
      attempts.handBack(jobId, attempt),
    ),
    rpc.serve(jobEndpoints.failAttempt, ({ jobId, attempt, error, permanent }) =>
      attempts.failAttempt(jobId, attempt, error, permanent),
    ),
  ];
  // Subscriptions are live on the server once flushed; callers may use them right away.
  await nats.flush();
  sweeper.start(context.settings.sweepIntervalMs);

  return {
    async stop() {
      await sweeper.stop();
      for (const subscription of subscriptions) subscription.unsubscribe();
    },
    sweep: (now) => sweeper.sweep(now),
  };
}
