import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Consumer, type JsMsg, jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import type { ConsumerDefinition, ConsumerName, Topology } from '@tamp/proto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Rpc } from '../rpc';
import { inConsumerSpan } from '../tracing';
import { type JobOutcomeLabel, jobWorkerMetrics } from './metrics';
import { QueuedDelivery } from './queued-delivery';
import { hostResourceGate, type ResourceGate } from './resource-gate';
import type { ProcessJob } from './types';

export interface JobWorkerOptions {
  rpc: Rpc;
  nats: NatsConnection;
  topology: Topology;
  /** A consumer of the topology (e.g. `worker-image`) or an explicit definition. */
  consumer: ConsumerName | ConsumerDefinition;
  /** Reported to the job service with every attempt, e.g. `worker-image/<host>/<pid>`. */
  workerName: string;
  /** Jobs processed at once at most; never more deliveries than this are held. */
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
  /** How long one pull waits for messages. Default 5 s. */
  fetchExpiresMs?: number;
  /** Lease extension period; default a third of the consumer's ack wait (read from the server). */
  heartbeatIntervalMs?: number;
  /**
   * Whether one more job fits besides those running; by default what the kernel reports of CPU
   * pressure and memory (hostResourceGate). The image worker adds its memory budget.
   */
  resourceGate?: ResourceGate;
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

const DEFAULT_STOP_GRACE_MS = 20_000;
const DEFAULT_FETCH_EXPIRES_MS = 5_000;
/** How often a worker whose resources are taken looks again. */
const RESOURCE_RECHECK_MS = 500;

/**
 * Runs queued jobs from a JOBS pull consumer (each delivery: QueuedDelivery). Pulls only what it
 * can start now: no more than `concurrency` at once, and beyond the first job only while the
 * resource gate says the machine can carry another, so a backlog waits in JetStream.
 */
export async function startJobWorker(options: JobWorkerOptions): Promise<JobWorker> {
  if (!Number.isSafeInteger(options.concurrency) || options.concurrency < 1) {
    throw new RangeError(`concurrency must be a positive integer, got ${options.concurrency}`);
  }
  const definition =
    typeof options.consumer === 'string'
      ? options.topology.consumers[options.consumer]
      : options.consumer;
  const logger = options.logger.child({ consumer: definition.durableName });
  const metrics = jobWorkerMetrics(options.metrics);
  const gate = options.resourceGate ?? hostResourceGate();
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

  const running = new Set<{ delivery: QueuedDelivery; done: Promise<void> }>();
  let stopping = false;
  let wakeLoop: (() => void) | undefined;
  let stopped: Promise<void> | undefined;

  const settings = {
    rpc: options.rpc,
    processJob: options.processJob,
    workerName: options.workerName,
    logger,
    tempDir: options.tempDir ?? tmpdir(),
    heartbeatIntervalMs,
    jobTimeoutMs: options.jobTimeoutMs,
    record(outcome: JobOutcomeLabel, startedAt?: number) {
      metrics.processed.inc({ mode: 'queued', outcome });
      if (startedAt !== undefined) {
        const seconds = (performance.now() - startedAt) / 1000;
        metrics.duration.observe({ mode: 'queued', outcome }, seconds);
      }
    },
  };

  const dispatch = (msg: JsMsg) => {
    const delivery = new QueuedDelivery(msg, settings);
    metrics.inFlight.inc({ mode: 'queued' });
    const entry = { delivery, done: Promise.resolve() };
    entry.done = inConsumerSpan(definition.durableName, msg, () => delivery.handle())
      .catch((error: unknown) => {
        // Not the pipeline (whose failures are reported): a bug. Redeliver after a pause.
        logger.error({ err: error, jobId: delivery.jobId }, 'job handling crashed');
        if (!delivery.handedBack) msg.nak(2_000);
      })
      .finally(() => {
        running.delete(entry);
        metrics.inFlight.dec({ mode: 'queued' });
        wakeLoop?.();
      });
    running.add(entry);
  };

  /**
   * How many deliveries to pull: one, once a slot is free and (beyond the first job) the
   * resources allow another; 0 when stopping. One at a time, so each is admitted on its own.
   */
  const roomForWork = async (): Promise<number> => {
    for (;;) {
      if (stopping) return 0;
      const free = options.concurrency - running.size;
      if (free > 0) {
        const blockedBy = running.size === 0 ? null : gate.blockedBy();
        if (blockedBy === null) return 1;
        metrics.admissionWaits.inc({ reason: blockedBy });
        await sleep(RESOURCE_RECHECK_MS);
        continue;
      }
      await new Promise<void>((resolve) => {
        wakeLoop = () => {
          wakeLoop = undefined;
          resolve();
        };
      });
    }
  };

  const loop = async () => {
    while (!stopping) {
      const room = await roomForWork();
      if (room === 0) break;
      try {
        const batch = await consumer.fetch({ max_messages: room, expires: fetchExpiresMs });
        // Not cut short on stop: the server keeps a pull request open until it expires, and
        // what it delivers to an abandoned request would sit out its whole lease. So the pull
        // runs out, and what still arrives is taken (it gets the grace period like the rest).
        for await (const msg of batch) dispatch(msg);
      } catch (error) {
        if (stopping) break;
        // NATS down or restarting: the client reconnects by itself; pull again shortly.
        logger.warn({ err: error }, 'pulling jobs failed; retrying');
        await sleep(1_000);
      }
    }
  };
  const looping = loop();
  logger.info(
    { concurrency: options.concurrency, ackWaitMs, heartbeatIntervalMs },
    'job worker started',
  );

  const stop = async (graceMs: number) => {
    const deadline = Date.now() + graceMs;
    stopping = true;
    wakeLoop?.();
    // The open pull (if any) ends within fetchExpiresMs; only then is nothing more on its way
    // to this worker, so a job handed back afterwards goes to another worker.
    await looping;
    const remaining = deadline - Date.now();
    if (running.size > 0 && remaining > 0) {
      logger.info({ inFlight: running.size, graceMs }, 'waiting for running jobs');
      await Promise.race([
        Promise.allSettled([...running].map((entry) => entry.done)),
        sleep(remaining),
      ]);
    }
    await Promise.all([...running].map((entry) => entry.delivery.handBack()));
    // Give aborted runners a moment to remove their temp files; never wait on them for long.
    await Promise.race([
      Promise.allSettled([...running].map((entry) => entry.done)),
      sleep(2_000, undefined, { ref: false }),
    ]);
    logger.info('job worker stopped');
  };

  return {
    stop(stopOptions = {}) {
      stopped ??= stop(stopOptions.graceMs ?? options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS);
      return stopped;
    },
    get inFlight() {
      return running.size;
    },
  };
}
