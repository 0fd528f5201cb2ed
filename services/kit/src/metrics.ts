import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import type { ConsumerDefinition, JobStatus, Pipeline } from '@tamp/proto';
import {
  AggregatorRegistry,
  Counter,
  collectDefaultMetrics,
  Gauge,
  Histogram,
  Registry,
} from 'prom-client';

export type { Registry };

/** What a process's `/metrics` serves: one registry, or several merged (processMetrics). */
export type MetricsSource = Pick<Registry, 'metrics' | 'contentType'>;

/**
 * One registry per service, labelled with the service name, with Node's default metrics unless
 * the process runs several services (runServices gives those to a registry of the process's
 * own). The metrics a service adds are defined below or beside their service;
 * docs/operating.md explains each, and the chart's dashboard and alerts read them.
 */
export function createMetricsRegistry(
  service: string,
  options: { nodeMetrics?: boolean } = {},
): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  if (options.nodeMetrics ?? true) {
    collectDefaultMetrics({
      register: registry,
      eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS,
    });
  }
  return registry;
}

/**
 * What a process's `/metrics` serves: its one service's registry, or for several services
 * (which runServices creates without Node's metrics) those registries and one of the process's
 * own with Node's metrics, as one exposition. A metric two services define (the workers' job
 * counters) is then one family whose series differ by their `service` label, as Prometheus
 * requires, rather than two families of the same name.
 */
export function processMetrics(
  processName: string,
  registries: readonly Registry[],
): MetricsSource {
  const [only, ...others] = registries;
  if (only !== undefined && others.length === 0) return only;
  return mergedMetrics([createMetricsRegistry(processName), ...registries]);
}

function mergedMetrics(registries: readonly Registry[]): MetricsSource {
  return {
    contentType: Registry.PROMETHEUS_CONTENT_TYPE,
    async metrics() {
      const families = await Promise.all(registries.map((registry) => registry.getMetricsAsJSON()));
      return AggregatorRegistry.aggregate(families).metrics();
    },
  };
}

/**
 * How often the event-loop delay is sampled. prom-client's default (10 ms) wakes every process
 * 100 times a second, about 2.4 ms of CPU per second each, most of what an idle stack of ten
 * processes spent; at 100 ms it costs under 0.5 ms, and a lag worth alerting on
 * (TampEventLoopLag: p99 over 0.5 s) still shows in full.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/** A counter on `registry`, incremented with exactly the labels named. */
function counter<Label extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly Label[] = [],
): Counter<Label> {
  return new Counter({ name, help, labelNames, registers: [registry] });
}

/** A histogram on `registry` with these buckets, observed with exactly the labels named. */
function histogram<Label extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly Label[],
  buckets: number[],
): Histogram<Label> {
  return new Histogram({ name, help, labelNames, buckets, registers: [registry] });
}

/** Latency buckets of an HTTP answer: long-polls (`?wait=`) and inline jobs reach tens of seconds. */
const HTTP_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** From creation to a terminal state: an inline job's fraction of a second to a long queued one. */
const JOB_SECONDS_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/**
 * Requests of an HTTP API (`api`: public or admin), by route pattern, never the raw URL, so a
 * job id does not become a series. Unmatched paths count under the route `unmatched`.
 */
export function httpMetrics(registry: Registry) {
  return {
    requests: counter(
      registry,
      'tamp_http_requests_total',
      'HTTP requests answered, by API, method, route pattern and status code',
      ['api', 'method', 'route', 'status'],
    ),
    duration: histogram(
      registry,
      'tamp_http_request_duration_seconds',
      'Time from receiving an HTTP request to the end of its answer, by API, method and route',
      ['api', 'method', 'route'],
      HTTP_SECONDS_BUCKETS,
    ),
  };
}
export type HttpMetrics = ReturnType<typeof httpMetrics>;

/** Every job metric is split by pipeline and by preset (proto's presetLabel). */
const JOB_LABELS = ['pipeline', 'preset'] as const;

/** Jobs the gateway created, counted when the job service answered 200 or 202. */
export function jobCreationMetrics(registry: Registry) {
  return counter(
    registry,
    'tamp_jobs_created_total',
    'Jobs created (200 inline or 202 queued), by pipeline and preset (custom: explicit operations)',
    JOB_LABELS,
  );
}
export type JobCreationMetrics = ReturnType<typeof jobCreationMetrics>;

/** A job that reached a terminal state, as the job service settles it. */
export interface SettledJob {
  pipeline: Pipeline;
  /** The job's presetLabel. */
  preset: string;
  status: JobStatus;
  /** True when the job ran through the inline path and never entered the queue. */
  inline: boolean;
  createdAt: Date;
  finishedAt: Date;
}

/**
 * Terminal jobs as the job service settles them, once per job (recorded with the job's event),
 * and the time from creation to that state: what a client waits, queueing and retries included.
 * Both are recorded together, with the same pipeline, preset and status.
 */
export function jobOutcomeMetrics(registry: Registry) {
  const finished = counter(
    registry,
    'tamp_jobs_finished_total',
    'Jobs that reached a terminal state, by pipeline, preset, status (completed, failed) and mode (inline, queued)',
    [...JOB_LABELS, 'status', 'mode'],
  );
  const duration = histogram(
    registry,
    'tamp_job_duration_seconds',
    'Time from a job’s creation to its terminal state, by pipeline, preset and status',
    [...JOB_LABELS, 'status'],
    JOB_SECONDS_BUCKETS,
  );
  return {
    record({ pipeline, preset, status, inline, createdAt, finishedAt }: SettledJob): void {
      const labels = { pipeline, preset, status };
      finished.inc({ ...labels, mode: inline ? 'inline' : 'queued' });
      duration.observe(labels, (finishedAt.getTime() - createdAt.getTime()) / 1000);
    },
  };
}
export type JobOutcomeMetrics = ReturnType<typeof jobOutcomeMetrics>;

/** Credits moved by billing: reserved when a job is created, refunded when it fails. */
export function creditMetrics(registry: Registry) {
  return {
    reserved: counter(
      registry,
      'tamp_credits_reserved_total',
      'Credits reserved for new jobs (replays of a reservation not counted), by pipeline',
      ['pipeline'],
    ),
    refunded: counter(
      registry,
      'tamp_credits_refunded_total',
      'Credits given back for failed jobs (replays of a refund not counted)',
    ),
  };
}
export type CreditMetrics = ReturnType<typeof creditMetrics>;

export function recordReservation(
  metrics: CreditMetrics,
  pipeline: Pipeline,
  answer: { reserved: number; replayed: boolean },
): void {
  if (!answer.replayed) metrics.reserved.inc({ pipeline }, answer.reserved);
}

export function recordRefund(
  metrics: CreditMetrics,
  answer: { refunded: number; replayed: boolean },
): void {
  if (!answer.replayed) metrics.refunded.inc(answer.refunded);
}

/**
 * The JetStream backlog of each consumer, read from the server at scrape time: `pending`
 * messages not yet delivered and `unacknowledged` ones a worker holds. One process exporting it
 * is enough (the job service); a consumer the server cannot describe has no series.
 */
export function observeQueueBacklog(
  registry: Registry,
  nats: NatsConnection,
  consumers: readonly ConsumerDefinition[],
): void {
  new Gauge({
    name: 'tamp_queue_messages',
    help: 'JetStream messages of a consumer: pending (not yet delivered) or unacknowledged (held by a worker)',
    labelNames: ['stream', 'consumer', 'state'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      if (nats.isClosed()) return;
      const manager = await jetstreamManager(nats, { checkAPI: false });
      await Promise.all(
        consumers.map(async ({ stream, durableName }) => {
          const info = await manager.consumers.info(stream, durableName).catch(() => null);
          if (info === null) return;
          const labels = { stream, consumer: durableName };
          this.set({ ...labels, state: 'pending' }, info.num_pending);
          this.set({ ...labels, state: 'unacknowledged' }, info.num_ack_pending);
        }),
      );
    },
  });
}
