import { tmpdir } from 'node:os';
import { type Consumer, type ConsumerMessages, type JsMsg, jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import {
  type ConsumerDefinition,
  type ConsumerName,
  type JobWorkMessage,
  jobEndpoints,
  jobWorkMessage,
  type Topology,
} from '@tamp/proto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { EndpointResponse, Rpc } from '../rpc';
import { type JobOutcomeLabel, jobWorkerMetrics } from './metrics';
import { describeError, isPermanentError, type JobOutcome, type ProcessJob } from './types';
import { withJobWorkspace } from './workspace';

export interface JobWorkerOptions {
  rpc: Rpc;
  nats: NatsConnection;
  topology: Topology;
  /** A consumer of the topology (e.g. `worker-image`) or an explicit definition. */
  consumer: ConsumerName | ConsumerDefinition;
  /** Reported to the job service with every attempt, e.g. `worker-image/<host>/<pid>`. */
  workerName: string;
  /** Jobs processed at once; never more deliveries than this are held. */
  concurrency: number;
  processJob: ProcessJob;
  logger: Logger;
  metrics: Registry;
  /** Parent of the per-job temp directories. Default: the OS temp dir. */
  tempDir?: string;
  /**
   * How long `stop()` lets running jobs finish before handing them back. Default 20 s; keep it
   * above `fetchExpiresMs` and below the service's shutdown timeout.
   */
  stopGraceMs?: number;
  /** A job running longer than this is aborted and counts as a failed (retryable) attempt. */
  jobTimeoutMs?: number;
  /** Delay before a redelivery when the job service cannot be reached. Default 2 s. */
  unavailableRetryMs?: number;
  /** How long one pull waits for messages. Default 5 s. */
  fetchExpiresMs?: number;
  /** Lease extension period; default a third of the consumer's ack wait (read from the server). */
  heartbeatIntervalMs?: number;
}

export interface JobWorker {
  /**
   * Stops pulling, lets running jobs finish within the grace period, then hands the rest back
   * (`nak()` without delay, so another worker gets them at once). Resolves when every job
   * this worker held is acknowledged, nak'ed or handed back. Safe to call twice.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
  /** Jobs being processed right now. */
  readonly inFlight: number;
}

interface RunningJob {
  msg: JsMsg;
  jobId: string;
  controller: AbortController;
  handedBack: boolean;
  done: Promise<void>;
}

const DEFAULT_STOP_GRACE_MS = 20_000;
/** Telling the job service about a hand-back must not hold up a shutdown for long. */
const HAND_BACK_TIMEOUT_MS = 2_000;
const UNPARSED_JOB_ID = '(unparsed)';
const DEFAULT_UNAVAILABLE_RETRY_MS = 2_000;
const DEFAULT_FETCH_EXPIRES_MS = 5_000;
/** `heartbeat()` from a runner extends the lease at most this often. */
const MIN_HEARTBEAT_GAP_MS = 1_000;

/**
 * Runs queued jobs from a JOBS pull consumer. The job service owns every transition: each
 * delivery starts with `beginAttempt` (run / skip / failed), success is `completeJob` then ack,
 * failure is `failAttempt` then nak with the backoff it returns (or ack when the job failed).
 * While a job runs the lease is extended with in-progress acks every ackWait/3.
 */
export async function startJobWorker(options: JobWorkerOptions): Promise<JobWorker> {
  const { rpc, processJob, workerName } = options;
  if (!Number.isSafeInteger(options.concurrency) || options.concurrency < 1) {
    throw new RangeError(`concurrency must be a positive integer, got ${options.concurrency}`);
  }
  const definition =
    typeof options.consumer === 'string'
      ? options.topology.consumers[options.consumer]
      : options.consumer;
  const logger = options.logger.child({ consumer: definition.durableName });
  const metrics = jobWorkerMetrics(options.metrics);
  const tempDir = options.tempDir ?? tmpdir();
  const unavailableRetryMs = options.unavailableRetryMs ?? DEFAULT_UNAVAILABLE_RETRY_MS;
  const fetchExpiresMs = options.fetchExpiresMs ?? DEFAULT_FETCH_EXPIRES_MS;

  const consumer: Consumer = await jetstream(options.nats).consumers.get(
    definition.stream,
    definition.durableName,
  );
  // The server's ack wait is the truth (it may differ from the definition until provisioned).
  const info = await consumer.info();
  const ackWaitMs = Math.round((info.config.ack_wait ?? 0) / 1_000_000) || definition.ackWaitMs;
  const heartbeatIntervalMs =
    options.heartbeatIntervalMs ?? Math.max(100, Math.floor(ackWaitMs / 3));

  const running = new Set<RunningJob>();
  let stopping = false;
  let wakeLoop: (() => void) | undefined;
  let stopped: Promise<void> | undefined;

  const record = (outcome: JobOutcomeLabel, startedAt?: number) => {
    metrics.processed.inc({ mode: 'queued', outcome });
    if (startedAt !== undefined) {
      metrics.duration.observe({ mode: 'queued', outcome }, (performance.now() - startedAt) / 1000);
    }
  };

  const ack = async (msg: JsMsg) => {
    try {
      await msg.ackAck();
    } catch (error) {
      // The ack may still have landed; if not, the redelivery is skipped by the job service.
      logger.warn({ err: error }, 'acknowledgement not confirmed');
    }
  };

  /** A failed attempt: the job service decides between a retry (nak with delay) and failed. */
  const failAttempt = async (
    job: RunningJob,
    attempt: number,
    error: unknown,
    startedAt: number,
  ) => {
    const permanent = isPermanentError(error);
    const log = logger.child({ jobId: job.jobId, attempt });
    log.warn({ err: error, permanent }, 'job attempt failed');
    try {
      const decision = await rpc.call(jobEndpoints.failAttempt, {
        jobId: job.jobId,
        attempt,
        error: describeError(error),
        permanent,
      });
      if (decision.status === 'pending') {
        job.msg.nak(decision.retryInMs);
        record('retried', startedAt);
      } else {
        await ack(job.msg);
        record('failed', startedAt);
      }
    } catch (callError) {
      log.error({ err: callError }, 'could not report the failed attempt; redelivering');
      job.msg.nak(unavailableRetryMs);
      record('retried', startedAt);
    }
  };

  const runJob = async (job: RunningJob, work: JobWorkMessage, attempt: number) => {
    const startedAt = performance.now();
    const log = logger.child({ jobId: job.jobId, attempt, pipeline: work.pipeline });
    let lastBeat = Date.now();
    const beat = () => {
      if (job.handedBack) return;
      lastBeat = Date.now();
      job.msg.working();
    };
    const timer = setInterval(beat, heartbeatIntervalMs);
    const timeout =
      options.jobTimeoutMs === undefined
        ? undefined
        : setTimeout(
            () =>
              job.controller.abort(
                new Error(`Processing took longer than ${options.jobTimeoutMs} ms`),
              ),
            options.jobTimeoutMs,
          );
    try {
      let outcome: JobOutcome;
      try {
        outcome = await withJobWorkspace(tempDir, job.jobId, (workDir) =>
          processJob(work, {
            workDir,
            signal: job.controller.signal,
            heartbeat: () => {
              if (Date.now() - lastBeat >= MIN_HEARTBEAT_GAP_MS) beat();
            },
            attempt,
            mode: 'queued',
            logger: log,
          }),
        );
      } catch (error) {
        if (job.handedBack) return;
        const reason = job.controller.signal.aborted ? job.controller.signal.reason : error;
        await failAttempt(job, attempt, reason ?? error, startedAt);
        return;
      }
      if (job.handedBack) return;
      let accepted: boolean;
      try {
        ({ accepted } = await rpc.call(jobEndpoints.completeJob, {
          jobId: job.jobId,
          attempt,
          ...outcome,
        }));
      } catch (error) {
        // The result object is in place under its deterministic key; a rerun overwrites it.
        await failAttempt(job, attempt, error, startedAt);
        return;
      }
      await ack(job.msg);
      if (accepted) {
        log.info({ processingMs: outcome.metrics.processingMs }, 'job completed');
        record('completed', startedAt);
      } else {
        log.warn('the job service did not accept the completion (job no longer processing)');
        record('skipped', startedAt);
      }
    } finally {
      clearInterval(timer);
      if (timeout) clearTimeout(timeout);
    }
  };

  const handle = async (job: RunningJob) => {
    const { msg } = job;
    const attempt = msg.info.deliveryCount;
    let body: unknown;
    try {
      body = msg.json();
    } catch {
      body = undefined;
    }
    const parsed = jobWorkMessage.safeParse(body);
    if (!parsed.success) {
      // Nothing can ever process it; keep it from cycling. The job service is told when the
      // message at least names a job.
      logger.error(
        { issues: parsed.error.issues.slice(0, 5), seq: msg.seq },
        'invalid job message',
      );
      const jobId = (body as { jobId?: unknown } | undefined)?.jobId;
      if (typeof jobId === 'string') {
        await rpc
          .call(jobEndpoints.failAttempt, {
            jobId,
            attempt,
            error: 'The job could not be read by the worker',
            permanent: true,
          })
          .catch(() => undefined);
      }
      msg.term(); // no reason: servers before 2.10 ignore a +TERM that carries one
      record('rejected');
      return;
    }
    job.jobId = parsed.data.jobId;
    let begin: EndpointResponse<typeof jobEndpoints.beginAttempt>;
    try {
      begin = await rpc.call(jobEndpoints.beginAttempt, {
        jobId: job.jobId,
        attempt,
        worker: workerName,
      });
    } catch (error) {
      logger.warn({ err: error, jobId: job.jobId }, 'beginAttempt failed; redelivering later');
      msg.nak(unavailableRetryMs);
      record('retried');
      return;
    }
    if (job.handedBack) return;
    if (begin.action !== 'run') {
      logger.info({ jobId: job.jobId, attempt, action: begin.action }, 'delivery not run');
      await ack(msg);
      record(begin.action === 'skip' ? 'skipped' : 'failed');
      return;
    }
    await runJob(job, begin.work ?? parsed.data, attempt);
  };

  const dispatch = (msg: JsMsg) => {
    const job: RunningJob = {
      msg,
      jobId: UNPARSED_JOB_ID,
      controller: new AbortController(),
      handedBack: false,
      done: Promise.resolve(),
    };
    metrics.inFlight.inc({ mode: 'queued' });
    job.done = handle(job)
      .catch((error) => {
        logger.error({ err: error, jobId: job.jobId }, 'job handling crashed');
        if (!job.handedBack) msg.nak(unavailableRetryMs);
      })
      .finally(() => {
        running.delete(job);
        metrics.inFlight.dec({ mode: 'queued' });
        wakeLoop?.();
      });
    running.add(job);
  };

  const waitForSlot = () =>
    new Promise<void>((resolve) => {
      if (stopping || running.size < options.concurrency) {
        resolve();
        return;
      }
      wakeLoop = () => {
        if (stopping || running.size < options.concurrency) {
          wakeLoop = undefined;
          resolve();
        }
      };
    });

  const loop = async () => {
    while (!stopping) {
      await waitForSlot();
      if (stopping) break;
      try {
        const batch: ConsumerMessages = await consumer.fetch({
          max_messages: options.concurrency - running.size,
          expires: fetchExpiresMs,
        });
        // Not cut short on stop: the server keeps a pull request open until it expires, and
        // what it delivers to an abandoned request would sit out its whole lease. So the pull
        // runs out, and what still arrives is taken (it gets the grace period like the rest).
        for await (const msg of batch) dispatch(msg);
      } catch (error) {
        if (stopping) break;
        logger.warn({ err: error }, 'pulling jobs failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
    }
  };
  const looping = loop();
  logger.info(
    { concurrency: options.concurrency, ackWaitMs, heartbeatIntervalMs },
    'job worker started',
  );

  /**
   * Best effort and brief: if the job service cannot be told, the job is still handed back and
   * its redelivery simply counts as an attempt (as a crash would).
   */
  const tellHandBack = async (job: RunningJob) => {
    if (job.jobId === UNPARSED_JOB_ID) return;
    try {
      await rpc.call(
        jobEndpoints.handBackAttempt,
        { jobId: job.jobId, attempt: job.msg.info.deliveryCount },
        { timeoutMs: HAND_BACK_TIMEOUT_MS },
      );
    } catch (error) {
      logger.warn(
        { err: error, jobId: job.jobId },
        'hand-back not recorded; it counts as an attempt',
      );
    }
  };

  const stop = async (stopOptions: { graceMs?: number } = {}) => {
    const graceMs = stopOptions.graceMs ?? options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
    const deadline = Date.now() + graceMs;
    stopping = true;
    wakeLoop?.();
    // The open pull (if any) ends within fetchExpiresMs; only then is nothing more on its way
    // to this worker, so a job handed back afterwards goes to another worker.
    await looping;
    const remaining = deadline - Date.now();
    if (running.size > 0 && remaining > 0) {
      logger.info({ inFlight: running.size, graceMs }, 'waiting for running jobs');
      let graceTimer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...running].map((job) => job.done)),
        new Promise((resolve) => {
          graceTimer = setTimeout(resolve, remaining);
        }),
      ]);
      clearTimeout(graceTimer);
    }
    await Promise.all(
      [...running].map(async (job) => {
        // Hand back: redelivered at once to another worker; what this one still finishes is
        // ignored. The job service hears it first, so the redelivery does not cost an attempt.
        job.handedBack = true;
        await tellHandBack(job);
        job.msg.nak();
        job.controller.abort(new Error('The worker is shutting down'));
        record('handed_back');
        logger.warn({ jobId: job.jobId }, 'job handed back on shutdown');
      }),
    );
    // Give aborted runners a moment to remove their temp files; never wait on them for long.
    await Promise.race([
      Promise.allSettled([...running].map((job) => job.done)),
      new Promise((resolve) => setTimeout(resolve, 2_000).unref()),
    ]);
    logger.info('job worker stopped');
  };

  return {
    stop(stopOptions) {
      stopped ??= stop(stopOptions);
      return stopped;
    },
    get inFlight() {
      return running.size;
    },
  };
}
