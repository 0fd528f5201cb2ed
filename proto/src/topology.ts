import type { Pipeline } from './limits';

/**
 * NATS subjects, streams and consumers. A namespace prefixes every subject and stream name so
 * several Tamp installations (or parallel test files) can share one NATS server without seeing
 * each other's messages.
 */
export interface StreamDefinition {
  name: string;
  subjects: string[];
  /** `workqueue`: a message is removed once acknowledged. `limits`: kept until max age. */
  retention: 'workqueue' | 'limits';
  maxAgeMs: number;
  /** Publishes with the same message id inside this window are stored once. */
  duplicateWindowMs: number;
  /**
   * A stream of counters (JetStream's `allow_msg_counter`, nats-server 2.12 or later): a publish
   * carrying `Nats-Incr` adds to its subject's total, which the publish ack returns.
   */
  counter?: boolean;
  /** Messages kept per subject, the oldest dropped first (JetStream's default: no limit). */
  maxMessagesPerSubject?: number;
}

export interface ConsumerDefinition {
  stream: string;
  durableName: string;
  filterSubject: string;
  /** Lease length: unacknowledged work is redelivered after this, unless the worker heartbeats. */
  ackWaitMs: number;
  /** -1: JetStream never gives up; the worker itself fails a job after its last attempt. */
  maxDeliver: number;
  maxAckPending: number;
}

export const WORKER_SERVICES = {
  audio: 'worker-audio',
  image: 'worker-image',
  text: 'worker-text',
} as const satisfies Record<Pipeline, string>;

const NAMESPACE_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;

const MINUTE_MS = 60 * 1000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

export function createTopology(namespace = '') {
  if (namespace !== '' && !NAMESPACE_PATTERN.test(namespace)) {
    throw new Error(`NATS namespace must match ${NAMESPACE_PATTERN}, got "${namespace}"`);
  }
  const subjectPrefix = namespace === '' ? '' : `${namespace}.`;
  const streamPrefix = namespace === '' ? '' : `${namespace.toUpperCase().replaceAll('-', '_')}_`;

  const subjects = {
    jobs: {
      audio: `${subjectPrefix}jobs.audio`,
      image: `${subjectPrefix}jobs.image`,
      text: `${subjectPrefix}jobs.text`,
    } satisfies Record<Pipeline, string>,
    events: {
      completed: `${subjectPrefix}events.job.completed`,
      failed: `${subjectPrefix}events.job.failed`,
    },
    /** Synchronous inline processing, served by worker queue groups. */
    inline: {
      image: `${subjectPrefix}work.image.inline`,
      text: `${subjectPrefix}work.text.inline`,
    },
    /** Request/reply endpoints of a service, e.g. `svc.billing.reserve`. */
    service: (service: string, endpoint: string) => `${subjectPrefix}svc.${service}.${endpoint}`,
    /** Published on every terminal state of a job; long-polls wait on it. */
    jobNotification: (jobId: string) => `${subjectPrefix}notify.job.${jobId}`,
    allJobNotifications: `${subjectPrefix}notify.job.*`,
    /** Published by billing after an account's settings change; caches of them evict it. */
    accountNotification: (accountId: string) => `${subjectPrefix}notify.account.${accountId}`,
    allAccountNotifications: `${subjectPrefix}notify.account.*`,
    /** The counter of an account's requests in one rate-limit window (REQUEST_COUNTS). */
    requestCount: (accountId: string, window: number) =>
      `${subjectPrefix}counts.requests.${accountId}.${window}`,
  };

  const jobsStream: StreamDefinition = {
    name: `${streamPrefix}JOBS`,
    subjects: [`${subjectPrefix}jobs.*`],
    retention: 'workqueue',
    maxAgeMs: 8 * DAY_MS,
    duplicateWindowMs: HOUR_MS,
  };
  const eventsStream: StreamDefinition = {
    name: `${streamPrefix}EVENTS`,
    subjects: [`${subjectPrefix}events.job.*`],
    retention: 'limits',
    maxAgeMs: 7 * DAY_MS,
    duplicateWindowMs: HOUR_MS,
  };
  // The gateways' per-account rate-limit counts, one subject per account and one-minute window:
  // each increment is a message holding the new total, so only the last one is kept, and the
  // max age sweeps a window once it is over.
  const requestCountsStream: StreamDefinition = {
    name: `${streamPrefix}REQUEST_COUNTS`,
    subjects: [`${subjectPrefix}counts.requests.>`],
    retention: 'limits',
    maxAgeMs: 2 * MINUTE_MS,
    duplicateWindowMs: MINUTE_MS,
    counter: true,
    maxMessagesPerSubject: 1,
  };

  const workerConsumer = (pipeline: Pipeline, ackWaitMs: number): ConsumerDefinition => ({
    stream: jobsStream.name,
    durableName: WORKER_SERVICES[pipeline],
    filterSubject: subjects.jobs[pipeline],
    ackWaitMs,
    maxDeliver: -1,
    maxAckPending: 1000,
  });
  const eventConsumer = (durableName: string): ConsumerDefinition => ({
    stream: eventsStream.name,
    durableName,
    filterSubject: `${subjectPrefix}events.job.*`,
    ackWaitMs: 30_000,
    maxDeliver: -1,
    maxAckPending: 1000,
  });

  return {
    namespace,
    subjects,
    streams: { jobs: jobsStream, events: eventsStream, requestCounts: requestCountsStream },
    consumers: {
      // Audio jobs are long: the worker heartbeats well inside this lease.
      'worker-audio': workerConsumer('audio', 60_000),
      'worker-image': workerConsumer('image', 30_000),
      'worker-text': workerConsumer('text', 30_000),
      billing: eventConsumer('billing'),
      webhook: eventConsumer('webhook'),
    } satisfies Record<string, ConsumerDefinition>,
  };
}

export type Topology = ReturnType<typeof createTopology>;
export type ConsumerName = keyof Topology['consumers'];

/** Publish dedup ids, so a retried publish is stored once. */
export const messageIds = {
  job: (jobId: string) => jobId,
  event: (jobId: string, event: 'job.completed' | 'job.failed') => `${jobId}:${event}`,
} as const;
