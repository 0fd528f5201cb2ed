import type { JsMsg } from '@nats-io/jetstream';
import { type JobWorkMessage, jitteredDelayMs, jobEndpoints, jobWorkMessage } from '@tamp/proto';
import type { Logger } from 'pino';
import { type Rpc, readMessage } from '../rpc';
import { annotateActiveSpan, markActiveSpanFailed } from '../tracing';
import { isTransientError } from '../transient-errors';
import { untilAnswered } from './job-service-calls';
import type { JobOutcomeLabel } from './metrics';
import { describeError, isPermanentError, type JobOutcome, type ProcessJob } from './types';
import { withJobWorkspace } from './workspace';

/** What every delivery of one worker shares. */
export interface DeliverySettings {
  rpc: Rpc;
  processJob: ProcessJob;
  workerName: string;
  logger: Logger;
  tempDir: string;
  heartbeatIntervalMs: number;
  jobTimeoutMs: number | undefined;
  record(outcome: JobOutcomeLabel, startedAt?: number): void;
}

/** Telling the job service about a hand-back must not hold up a shutdown for long. */
const HAND_BACK_TIMEOUT_MS = 2_000;
/**
 * How long a job set aside because a dependency failed waits before it is delivered again, at
 * most (equal jitter: the jobs set aside by one outage do not all return at the same moment).
 */
const SET_ASIDE_DELAY_MS = 5_000;
/** `heartbeat()` from a runner extends the lease at most this often. */
const MIN_HEARTBEAT_GAP_MS = 1_000;

/**
 * One JOBS delivery held by this worker, from receipt to ack, nak or hand-back. The job service
 * owns every transition: `beginAttempt` (run / skip / failed), then `completeJob` and ack, or
 * `failAttempt` and nak with the backoff it returns (ack when the job failed). The lease is
 * extended every `heartbeatIntervalMs` for as long as the delivery is held, also while the job
 * service is being waited for, so only the pipeline's own failures use up attempts.
 *
 * Acks are plain, not confirmed by the server: the job service has recorded the outcome before
 * any ack, so a lost one only brings the message back after its lease, and `beginAttempt` then
 * says not to run it (for a completed job after publishing its event again, which EVENTS
 * deduplicates).
 */
export class QueuedDelivery {
  /** Aborts the pipeline: a time-out, or the hand-back. */
  readonly controller = new AbortController();
  /** Ends waits for the job service: the hand-back only (a timed-out job still reports). */
  private readonly release = new AbortController();
  /** Set once the worker gave the delivery back on shutdown: nothing more is reported. */
  handedBack = false;
  jobId: string | undefined;
  private lastBeat = Date.now();

  constructor(
    readonly msg: JsMsg,
    private readonly settings: DeliverySettings,
  ) {}

  get attempt(): number {
    return this.msg.info.deliveryCount;
  }

  async handle(): Promise<void> {
    const timer = setInterval(() => this.beat(), this.settings.heartbeatIntervalMs);
    try {
      const work = await this.read();
      if (work === undefined) return;
      const begin = await this.ask('beginAttempt', () =>
        this.settings.rpc.call(jobEndpoints.beginAttempt, {
          jobId: work.jobId,
          attempt: this.attempt,
          worker: this.settings.workerName,
        }),
      );
      if (begin === undefined) return;
      if (begin.action === 'superseded') {
        // The message's lease is the later delivery's now: an ack or nak from here would apply
        // to the message and pull it from under that delivery.
        this.log.info('delivery superseded by a later one; left to it');
        this.settings.record('skipped');
        return;
      }
      if (begin.action !== 'run') {
        this.log.info({ action: begin.action }, 'delivery not run');
        this.msg.ack();
        this.settings.record(begin.action === 'skip' ? 'skipped' : 'failed');
        return;
      }
      await this.run(work);
    } finally {
      clearInterval(timer);
    }
  }

  /**
   * Gives the delivery back on shutdown: the job service hears it first, so the redelivery
   * does not cost an attempt (if it cannot be told, the redelivery counts, as a crash would).
   */
  async handBack(): Promise<void> {
    this.handedBack = true;
    if (this.jobId !== undefined) {
      await this.settings.rpc
        .call(
          jobEndpoints.handBackAttempt,
          { jobId: this.jobId, attempt: this.attempt },
          { timeoutMs: HAND_BACK_TIMEOUT_MS },
        )
        .catch((error: unknown) =>
          this.log.warn({ err: error }, 'hand-back not recorded; it counts as an attempt'),
        );
    }
    this.msg.nak();
    const reason = new Error('The worker is shutting down');
    this.controller.abort(reason);
    this.release.abort(reason);
    this.settings.record('handed_back');
    this.log.warn('job handed back on shutdown');
  }

  private get log(): Logger {
    return this.settings.logger.child({ jobId: this.jobId, attempt: this.attempt });
  }

  private beat(): void {
    if (this.handedBack) return;
    this.lastBeat = Date.now();
    this.msg.working();
  }

  /** The work message, or undefined for one nothing can ever process (terminated). */
  private async read(): Promise<JobWorkMessage | undefined> {
    const read = readMessage(this.msg, jobWorkMessage);
    if (read.ok) {
      this.jobId = read.value.jobId;
      annotateActiveSpan({ 'tamp.job_id': this.jobId, 'tamp.attempt': this.attempt });
      return read.value;
    }
    this.settings.logger.error(
      { issues: read.issues.slice(0, 5), seq: this.msg.seq },
      'invalid job message',
    );
    // Tell the job service when the message at least names a job, so the job fails visibly.
    const jobId = (read.body as { jobId?: unknown } | undefined)?.jobId;
    if (typeof jobId === 'string') {
      await this.settings.rpc
        .call(jobEndpoints.failAttempt, {
          jobId,
          attempt: this.attempt,
          error: 'The job could not be read by the worker',
          permanent: true,
        })
        .catch(() => undefined);
    }
    this.msg.term(); // no reason: servers before 2.10 ignore a +TERM that carries one
    this.settings.record('rejected');
    return undefined;
  }

  /**
   * A job-service call that waits out the job service (see untilAnswered). Undefined when the
   * worker stopped meanwhile: the delivery was handed back, there is nothing left to do.
   */
  private async ask<T>(what: string, call: () => Promise<T>): Promise<T | undefined> {
    try {
      return await untilAnswered(call, {
        signal: this.release.signal,
        logger: this.log,
        what,
      });
    } catch (error) {
      if (this.handedBack) return undefined;
      throw error;
    }
  }

  private async run(work: JobWorkMessage): Promise<void> {
    const startedAt = performance.now();
    const log = this.log.child({ pipeline: work.pipeline });
    const timeout =
      this.settings.jobTimeoutMs === undefined
        ? undefined
        : setTimeout(
            () =>
              this.controller.abort(
                new Error(`Processing took longer than ${this.settings.jobTimeoutMs} ms`),
              ),
            this.settings.jobTimeoutMs,
          );
    let outcome: JobOutcome;
    try {
      outcome = await withJobWorkspace(this.settings.tempDir, work.jobId, (workspace) =>
        this.settings.processJob(work, {
          workspace,
          signal: this.controller.signal,
          heartbeat: () => {
            if (Date.now() - this.lastBeat >= MIN_HEARTBEAT_GAP_MS) this.beat();
          },
          attempt: this.attempt,
          mode: 'queued',
          logger: log,
        }),
      );
    } catch (error) {
      if (this.handedBack) return;
      markActiveSpanFailed(error);
      const signal = this.controller.signal;
      if (!signal.aborted && isTransientError(error) && (await this.setAside(error))) return;
      await this.fail(signal.aborted ? (signal.reason ?? error) : error, startedAt);
      return;
    } finally {
      if (timeout) clearTimeout(timeout);
    }
    if (this.handedBack) return;
    // The result object is in place under its deterministic key: asking again is harmless.
    const completion = await this.ask('completeJob', () =>
      this.settings.rpc.call(jobEndpoints.completeJob, {
        jobId: work.jobId,
        attempt: this.attempt,
        ...outcome,
      }),
    );
    if (completion === undefined) return;
    this.msg.ack();
    if (completion.accepted) {
      log.info({ processingMs: outcome.metrics.processingMs }, 'job completed');
      this.settings.record('completed', startedAt);
    } else {
      log.warn('the job service did not accept the completion (job no longer processing)');
      this.settings.record('skipped', startedAt);
    }
  }

  /**
   * Storage or another dependency failed under the pipeline (a time-out, a refused connection):
   * not the job's own failure, so it is handed back without using an attempt and redelivered
   * after a pause. False when the job service refuses (it bounds how often a job is handed
   * back, so a job that only ever fails this way still ends): then it is a failed attempt.
   */
  private async setAside(error: unknown): Promise<boolean> {
    this.log.warn({ err: error }, 'a dependency failed under the job; handing it back');
    const answer = await this.ask('handBackAttempt', () =>
      this.settings.rpc.call(jobEndpoints.handBackAttempt, {
        jobId: this.jobId!,
        attempt: this.attempt,
      }),
    );
    if (answer === undefined) return true;
    if (!answer.accepted) return false;
    this.msg.nak(jitteredDelayMs(SET_ASIDE_DELAY_MS, Math.random));
    this.settings.record('handed_back');
    return true;
  }

  /** A failed attempt: the job service decides between a retry (nak with delay) and failed. */
  private async fail(error: unknown, startedAt: number): Promise<void> {
    const permanent = isPermanentError(error);
    this.log.warn({ err: error, permanent }, 'job attempt failed');
    const decision = await this.ask('failAttempt', () =>
      this.settings.rpc.call(jobEndpoints.failAttempt, {
        jobId: this.jobId!,
        attempt: this.attempt,
        error: describeError(error),
        permanent,
      }),
    );
    if (decision === undefined) return;
    if (decision.status === 'pending') {
      this.msg.nak(decision.retryInMs);
      this.settings.record('retried', startedAt);
    } else {
      this.msg.ack();
      this.settings.record('failed', startedAt);
    }
  }
}
