import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import type { ConsumerDefinition, Pipeline } from '@tamp/proto';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export type { Registry };

/**
 * One registry per process, labelled with the service name, with Node's default metrics. The
 * metrics a service adds are defined below or beside their service; the README's "Operating
 * Tamp" explains each, and the chart's dashboard and alerts read them.
 */
export function createMetricsRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** Latency buckets of an HTTP answer: long-polls (`?wait=`) and inline jobs reach tens of seconds. */
const HTTP_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Requests of an HTTP API (`api`: public or admin), by route pattern, never the raw URL, so a
 * job id does not become a series. Unmatched paths count under the route `unmatched`.
 */
export function httpMetrics(registry: Registry) {
  return {
    requests: new Counter({
      name: 'tamp_http_requests_total',
      help: 'HTTP requests answered, by API, method, route pattern and status code',
      labelNames: ['api', 'method', 'route', 'status'] as const,
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'tamp_http_request_duration_seconds',
      help: 'Time from receiving an HTTP request to the end of its answer, by API, method and route',
      labelNames: ['api', 'method', 'route'] as const,
      buckets: HTTP_SECONDS_BUCKETS,
      registers: [registry],
    }),
  };
}
export type HttpMetrics = ReturnType<typeof httpMetrics>;

/**
 * Jobs the gateway created, by pipeline and preset (`custom` for an explicit chain). Only the
 * gateway knows the preset: it expands it before the job service sees the job.
 */
export function jobCreationMetrics(registry: Registry) {
  return new Counter({
    name: 'tamp_jobs_created_total',
    help: 'Jobs created (200 inline or 202 queued), by pipeline and preset (custom: explicit operations)',
    labelNames: ['pipeline', 'preset'] as const,
    registers: [registry],
  });
}
export type JobCreationMetrics = ReturnType<typeof jobCreationMetrics>;

/**
 * Terminal jobs as the job service settles them, once per job (counted with the job's event),
 * and the time from creation to that state: what a client waits, queueing and retries included.
 */
export function jobOutcomeMetrics(registry: Registry) {
  return {
    finished: new Counter({
      name: 'tamp_jobs_finished_total',
      help: 'Jobs that reached a terminal state, by pipeline, status (completed, failed) and mode (inline, queued)',
      labelNames: ['pipeline', 'status', 'mode'] as const,
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'tamp_job_duration_seconds',
      help: 'Time from a job’s creation to its terminal state, by pipeline and status',
      labelNames: ['pipeline', 'status'] as const,
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600],
      registers: [registry],
    }),
  };
}
export type JobOutcomeMetrics = ReturnType<typeof jobOutcomeMetrics>;

/** Credits moved by billing: reserved when a job is created, refunded when it fails. */
export function creditMetrics(registry: Registry) {
  return {
    reserved: new Counter({
      name: 'tamp_credits_reserved_total',
      help: 'Credits reserved for new jobs (replays of a reservation not counted), by pipeline',
      labelNames: ['pipeline'] as const,
      registers: [registry],
    }),
    refunded: new Counter({
      name: 'tamp_credits_refunded_total',
      help: 'Credits given back for failed jobs (replays of a refund not counted)',
      registers: [registry],
    }),
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
