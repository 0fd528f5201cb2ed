import { setTimeout as sleep } from 'node:timers/promises';
import { type Consumer, type JsMsg, jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import {
  type ConsumerDefinition,
  type ConsumerName,
  jitteredDelayMs,
  type Topology,
} from '@tamp/proto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Rpc } from '../rpc';
import { inConsumerSpan } from '../tracing';
import { type JobOutcomeLabel, jobWorkerMetrics } from './metrics';
import { type DeliverySettings, QueuedDelivery } from './queued-delivery';
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
  /** Parent of the per-job temp directories. */
  tempDir: string;
  /** A job running longer than this is aborted and counts as a failed (retryable) attempt. */
  jobTimeoutMs?: number;
  /**
   * How long one pull waits for messages (FETCH_EXPIRES_MS; tests shorten it): `stop` waits for
   * the open pull to run out, so a stop takes at least this long.
   */
  fetchExpiresMs: number;
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
   * Stops pulling, lets running jobs finish within `graceMs`, then hands the rest back (`nak()`
   * without delay, so another worker gets them at once). Resolves when every job this worker
   * held is acknowledged, nak'ed or handed back. Safe to call twice. Keep `graceMs` above
   * `fetchExpiresMs` and below the service's shutdown timeout.
   */
  stop(options: { graceMs: number }): Promise<void>;
  /** Jobs being processed right now. */
  readonly inFlight: number;
}

/**
 * Long enough that an idle worker asks the server rarely, short enough that a stop (which lets
 * the open pull run out) is not held up for long.
 */
export const FETCH_EXPIRES_MS = 5_000;
/** How often a worker whose resources are taken looks again. */
const RESOURCE_RECHECK_MS = 500;
/** After a failed pull, the next one comes within this (equal jitter, proto's backoff.ts). */
const PULL_RETRY_MS = 1_000;
/** A delivery whose handling crashed comes back within this (equal jitter). */
const CRASH_REDELIVERY_MS = 2_000;

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
  const consumer = await jetstream(options.nats).consumers.get(
    definition.stream,
    definition.durableName,
  );
  // The server's ack wait is the truth (it may differ from the definition until provisioned).
  const info = await consumer.info();
  const ackWaitMs = Math.round((info.config.ack_wait ?? 0) / 1_000_000) || definition.ackWaitMs;
  const worker = new QueuedJobWorker(options, consumer, definition.durableName, ackWaitMs);
  worker.start();
  return worker;
}

interface RunningDelivery {
  delivery: QueuedDelivery;
  done: Promise<void>;
}

class QueuedJobWorker implements JobWorker {
  private readonly logger: Logger;
  private readonly metrics: ReturnType<typeof jobWorkerMetrics>;
  private readonly gate: ResourceGate;
  private readonly settings: DeliverySettings;
  private readonly running = new Set<RunningDelivery>();
  private stopping = false;
  private wakeLoop: (() => void) | undefined;
  private looping: Promise<void> = Promise.resolve();
  private stopped: Promise<void> | undefined;

  constructor(
    private readonly options: JobWorkerOptions,
    private readonly consumer: Consumer,
    private readonly durableName: string,
    private readonly ackWaitMs: number,
  ) {
    this.logger = options.logger.child({ consumer: durableName });
    this.metrics = jobWorkerMetrics(options.metrics);
    this.gate = options.resourceGate ?? hostResourceGate();
    this.settings = {
      rpc: options.rpc,
      processJob: options.processJob,
      workerName: options.workerName,
      logger: this.logger,
      tempDir: options.tempDir,
      heartbeatIntervalMs: options.heartbeatIntervalMs ?? Math.max(100, Math.floor(ackWaitMs / 3)),
      jobTimeoutMs: options.jobTimeoutMs,
      record: (outcome, startedAt) => this.record(outcome, startedAt),
    };
  }

  get inFlight(): number {
    return this.running.size;
  }

  start(): void {
    this.looping = this.loop();
    this.logger.info(
      {
        concurrency: this.options.concurrency,
        ackWaitMs: this.ackWaitMs,
        heartbeatIntervalMs: this.settings.heartbeatIntervalMs,
      },
      'job worker started',
    );
  }

  stop(stopOptions: { graceMs: number }): Promise<void> {
    this.stopped ??= this.shutDown(stopOptions.graceMs);
    return this.stopped;
  }

  private record(outcome: JobOutcomeLabel, startedAt?: number): void {
    this.metrics.processed.inc({ mode: 'queued', outcome });
    if (startedAt !== undefined) {
      const seconds = (performance.now() - startedAt) / 1000;
      this.metrics.duration.observe({ mode: 'queued', outcome }, seconds);
    }
  }

  private async loop(): Promise<void> {
    const expires = this.options.fetchExpiresMs;
    while (!this.stopping) {
      const room = await this.roomForWork();
      if (room === 0) break;
      try {
        const batch = await this.consumer.fetch({ max_messages: room, expires });
        // Not cut short on stop: the server keeps a pull request open until it expires, and
        // what it delivers to an abandoned request would sit out its whole lease. So the pull
        // runs out, and what still arrives is taken (it gets the grace period like the rest).
        for await (const msg of batch) this.dispatch(msg);
      } catch (error) {
        if (this.stopping) break;
        // NATS down or restarting: the client reconnects by itself; pull again shortly (in
        // 0.5 to 1 s, jittered so the workers do not all pull at once when it is back).
        this.logger.warn({ err: error }, 'pulling jobs failed; retrying');
        await sleep(jitteredDelayMs(PULL_RETRY_MS, Math.random));
      }
    }
  }

  /**
   * How many deliveries to pull: one, once a slot is free and (beyond the first job) the
   * resources allow another; 0 when stopping. One at a time, so each is admitted on its own.
   */
  private async roomForWork(): Promise<number> {
    for (;;) {
      if (this.stopping) return 0;
      if (this.running.size < this.options.concurrency) {
        const blockedBy = this.running.size === 0 ? null : this.gate.blockedBy();
        if (blockedBy === null) return 1;
        this.metrics.admissionWaits.inc({ reason: blockedBy });
        await sleep(RESOURCE_RECHECK_MS);
        continue;
      }
      await new Promise<void>((resolve) => {
        this.wakeLoop = () => {
          this.wakeLoop = undefined;
          resolve();
        };
      });
    }
  }

  private dispatch(msg: JsMsg): void {
    const delivery = new QueuedDelivery(msg, this.settings);
    this.metrics.inFlight.inc({ mode: 'queued' });
    const entry: RunningDelivery = { delivery, done: Promise.resolve() };
    entry.done = inConsumerSpan(this.durableName, msg, () => delivery.handle())
      .catch((error: unknown) => {
        // Not the pipeline (whose failures are reported): a bug. Redeliver after a pause.
        this.logger.error({ err: error, jobId: delivery.jobId }, 'job handling crashed');
        if (!delivery.handedBack) msg.nak(jitteredDelayMs(CRASH_REDELIVERY_MS, Math.random));
      })
      .finally(() => {
        this.running.delete(entry);
        this.metrics.inFlight.dec({ mode: 'queued' });
        this.wakeLoop?.();
      });
    this.running.add(entry);
  }

  private async shutDown(graceMs: number): Promise<void> {
    const deadline = Date.now() + graceMs;
    this.stopping = true;
    this.wakeLoop?.();
    // The open pull (if any) ends within fetchExpiresMs; only then is nothing more on its way
    // to this worker, so a job handed back afterwards goes to another worker.
    await this.looping;
    const remaining = deadline - Date.now();
    if (this.running.size > 0 && remaining > 0) {
      this.logger.info({ inFlight: this.running.size, graceMs }, 'waiting for running jobs');
      await Promise.race([this.allDone(), sleep(remaining)]);
    }
    await Promise.all([...this.running].map((entry) => entry.delivery.handBack()));
    // Give aborted runners a moment to remove their temp files; never wait on them for long.
    await Promise.race([this.allDone(), sleep(2_000, undefined, { ref: false })]);
    this.logger.info('job worker stopped');
  }

  private allDone(): Promise<unknown> {
    return Promise.allSettled([...this.running].map((entry) => entry.done));
  }
}
