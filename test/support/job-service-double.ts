import type { NatsConnection } from '@nats-io/nats-core';
import { type Responding, Rpc } from '@tamp/kit';
import {
  type EndpointDefinition,
  type JobMetrics,
  type JobWorkMessage,
  jobEndpoints,
  LIMITS,
  ServiceError,
  type Topology,
  type UsageDimensions,
} from '@tamp/proto';
import { pino } from 'pino';
import type { z } from 'zod';

/**
 * A test double of the job service's worker-facing endpoints (`beginAttempt`, `completeJob`,
 * `failAttempt`), served over real NATS with state in memory. It follows the spec's transition
 * table: created → pending → processing; a failed attempt with attempts left → pending with
 * exponential backoff; the 4th failed attempt or a permanent error → failed; terminal jobs skip,
 * and a delivery older than the one running the job is superseded.
 */
export interface DoubleJob {
  jobId: string;
  status: 'created' | 'pending' | 'processing' | 'completed' | 'failed';
  attempts: number[];
  completions: {
    attempt: number;
    outputKey: string | null;
    outputText: string | null;
    metrics: JobMetrics;
    usage: UsageDimensions;
  }[];
  failures: { attempt: number; error: string; permanent: boolean }[];
  /** Delivery numbers handed back by a worker shutting down. */
  handBacks: number[];
  error: string | null;
}

type AnyEndpoint = EndpointDefinition<z.ZodType, z.ZodType>;

export class JobServiceDouble {
  readonly jobs = new Map<string, DoubleJob>();
  /** Every call in order, e.g. `begin-attempt j1 1`. */
  readonly calls: string[] = [];
  /** Next calls of an endpoint (by name) to fail with UNAVAILABLE. */
  readonly failNext = new Map<string, number>();
  private readonly subscriptions: Responding[] = [];
  private readonly waiters: (() => void)[] = [];

  constructor(
    nats: NatsConnection,
    topology: Topology,
    private readonly retryBaseMs = 200,
  ) {
    const rpc = new Rpc(nats, topology, pino({ level: 'silent' }));
    this.subscriptions.push(
      rpc.serve(jobEndpoints.beginAttempt, async ({ jobId, attempt }) => {
        this.enter(jobEndpoints.beginAttempt, `${jobId} ${attempt}`);
        const job = this.job(jobId);
        const latest = Math.max(0, ...job.attempts);
        job.attempts.push(attempt);
        if (job.status === 'completed' || job.status === 'failed')
          return { action: 'skip' as const };
        if (job.status === 'processing' && attempt < latest)
          return { action: 'superseded' as const };
        if (attempt > LIMITS.attempts) {
          this.finish(job, 'failed', 'The job failed after all its attempts');
          return { action: 'failed' as const };
        }
        job.status = 'processing';
        this.changed();
        return { action: 'run' as const };
      }),
      rpc.serve(jobEndpoints.completeJob, async ({ jobId, attempt, ...result }) => {
        this.enter(jobEndpoints.completeJob, `${jobId} ${attempt}`);
        const job = this.job(jobId);
        if (job.status !== 'processing') return { accepted: false };
        job.completions.push({ attempt, ...result });
        this.finish(job, 'completed', null);
        return { accepted: true };
      }),
      rpc.serve(jobEndpoints.handBackAttempt, async ({ jobId, attempt }) => {
        this.enter(jobEndpoints.handBackAttempt, `${jobId} ${attempt}`);
        const job = this.job(jobId);
        if (job.status !== 'processing') return { accepted: false };
        job.handBacks.push(attempt);
        job.status = 'pending';
        this.changed();
        return { accepted: true };
      }),
      rpc.serve(jobEndpoints.failAttempt, async ({ jobId, attempt, error, permanent }) => {
        this.enter(jobEndpoints.failAttempt, `${jobId} ${attempt} ${permanent}`);
        const job = this.job(jobId);
        job.failures.push({ attempt, error, permanent });
        if (permanent || attempt >= LIMITS.attempts) {
          this.finish(job, 'failed', error);
          return { status: 'failed' as const, retryInMs: 0 };
        }
        job.status = 'pending';
        this.changed();
        return { status: 'pending' as const, retryInMs: this.retryBaseMs * 2 ** (attempt - 1) };
      }),
    );
  }

  /** Registers a job as `created` (what the job service does before publishing it). */
  create(work: Pick<JobWorkMessage, 'jobId'>): DoubleJob {
    const job: DoubleJob = {
      jobId: work.jobId,
      status: 'created',
      attempts: [],
      completions: [],
      failures: [],
      handBacks: [],
      error: null,
    };
    this.jobs.set(work.jobId, job);
    return job;
  }

  /** Resolves once `predicate` holds (checked after every state change). */
  async until<T>(predicate: () => T | undefined | false, timeoutMs = 30_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = predicate();
      if (value) return value;
      if (Date.now() > deadline) throw new Error('JobServiceDouble.until timed out');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 250);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  async close(): Promise<void> {
    for (const subscription of this.subscriptions) subscription.unsubscribe();
  }

  private enter(endpoint: AnyEndpoint, detail: string): void {
    this.calls.push(`${endpoint.name} ${detail}`);
    this.changed();
    const remaining = this.failNext.get(endpoint.name) ?? 0;
    if (remaining > 0) {
      this.failNext.set(endpoint.name, remaining - 1);
      throw new ServiceError('UNAVAILABLE', `${endpoint.name} failed on purpose (test)`);
    }
  }

  private job(jobId: string): DoubleJob {
    const job = this.jobs.get(jobId);
    if (!job) throw new ServiceError('JOB_NOT_FOUND', `no job ${jobId}`);
    return job;
  }

  private finish(job: DoubleJob, status: 'completed' | 'failed', error: string | null): void {
    job.status = status;
    job.error = error;
    this.changed();
  }

  private changed(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }
}
