import { setTimeout as sleep } from 'node:timers/promises';
import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import type { Msg, Subscription } from '@nats-io/nats-core';
import {
  connectMongo,
  connectNats,
  createLogger,
  createMetricsRegistry,
  type Db,
  type EndpointRequest,
  jobOutcomeMetrics,
  type MongoClient,
  type NatsConnection,
  ObjectStore,
  provisionIndexes,
  provisionTopology,
  type Registry,
  Rpc,
} from '@tamp/kit';
import {
  billingEndpoints,
  type ConsumedUpload,
  createTopology,
  type inlineWorkReply,
  type JobWorkMessage,
  jobEndpoints,
  MB,
  newId,
  ServiceError,
  STORAGE_LIFECYCLE_RULES,
  type Topology,
  uploadEndpoints,
} from '@tamp/proto';
import type { z } from 'zod';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import {
  ADMISSIONS_COLLECTION,
  JOB_INDEXES,
  JOBS_COLLECTION,
} from '../src/adapters/job-repository';
import type { JobSettings } from '../src/application/job-settings';
import { Sweeper, type SweeperCollaborators } from '../src/application/sweeper';
import { configSchema, jobSettingsFrom } from '../src/config';
import type { JobDocument } from '../src/domain/job';
import { jobServiceCore, type RunningJobService, startJobService } from '../src/service';

export type CreateJobInput = EndpointRequest<(typeof jobEndpoints)['createJob']>;

/**
 * Real NATS, FerretDB and MinIO for one test file, the job service in-process, and small real
 * NATS responders standing in for the peer services (billing, upload, inline workers).
 */
export class JobHarness {
  readonly infrastructure = isolatedInfrastructure();
  readonly logger = createLogger('job-test', 'silent');
  /** The service's metrics registry, as its `/metrics` would expose it. */
  readonly metrics: Registry = createMetricsRegistry('job');
  topology!: Topology;
  settings!: JobSettings;
  serviceNats!: NatsConnection;
  peerNats!: NatsConnection;
  mongo!: MongoClient;
  db!: Db;
  store!: ObjectStore;
  rpc!: Rpc;
  jsm!: JetStreamManager;
  service!: RunningJobService;

  /** Billing double: credits per account (unknown accounts have plenty), calls as received. */
  readonly credits = new Map<string, number>();
  readonly reserveCalls: EndpointRequest<typeof billingEndpoints.reserveCredits>[] = [];
  readonly refundCalls: EndpointRequest<typeof billingEndpoints.refundCredits>[] = [];
  private readonly reserved = new Map<string, number>();
  /** Jobs refunded before a reservation: billing turns their late reservation away. */
  private readonly released = new Set<string>();
  private readonly refunded = new Set<string>();
  /** How long the billing double takes to answer a reservation (applied before answering). */
  reserveDelayMs = 0;
  /** Jitter source of the service's retry backoff (tests fix it to know the delays). */
  random: () => number = Math.random;
  /** While true the billing double answers nothing (billing down). */
  billingDown = false;
  /** Upload double: consumable uploads by id. */
  readonly uploads = new Map<string, ConsumedUpload & { accountId: string }>();

  async start(settings: Partial<JobSettings> = {}): Promise<void> {
    const { infrastructure, logger } = this;
    this.topology = createTopology(infrastructure.namespace);
    this.serviceNats = await connectNats({ url: infrastructure.natsUrl, name: 'job', logger });
    this.peerNats = await connectNats({ url: infrastructure.natsUrl, name: 'peers', logger });
    await provisionTopology(this.serviceNats, this.topology, 1);
    this.jsm = await jetstreamManager(this.peerNats);
    ({ client: this.mongo, db: this.db } = await connectMongo({
      url: infrastructure.mongoUrl,
      database: infrastructure.database,
      appName: 'job-test',
      monitorCommands: true,
    }));
    await provisionIndexes(this.db, JOB_INDEXES);
    this.store = new ObjectStore({ ...infrastructure.s3, bucket: infrastructure.bucket });
    await this.store.provision(STORAGE_LIFECYCLE_RULES);
    this.servePeers();
    await this.peerNats.flush();
    this.settings = {
      ...jobSettingsFrom(configSchema.parse(infrastructure.serviceEnv)),
      inlineReplyTimeoutMs: 1_500,
      retryBaseMs: 100,
      sweepIntervalMs: 0,
      ...settings,
    };
    this.service = await startJobService({
      db: this.db,
      nats: this.serviceNats,
      topology: this.topology,
      rpc: new Rpc(this.serviceNats, this.topology, logger),
      store: this.store,
      logger,
      settings: this.settings,
      metrics: jobOutcomeMetrics(this.metrics),
      random: () => this.random(),
    });
    this.rpc = new Rpc(this.peerNats, this.topology, logger);
  }

  /**
   * A second set of the service's sweepers on the same store, NATS and peers, with some of
   * their collaborators replaced: how a test makes one sweeper fail and watches the others.
   */
  sweeperWith(replaced: Partial<SweeperCollaborators>): Sweeper {
    const { db, logger, settings, store, topology } = this;
    const rpc = new Rpc(this.serviceNats, topology, logger);
    const core = jobServiceCore({
      db,
      nats: this.serviceNats,
      topology,
      rpc,
      store,
      logger,
      settings,
    });
    return new Sweeper({ ...core, store, settings, logger, ...replaced });
  }

  async stop(): Promise<void> {
    await this.service?.stop();
    await this.db?.dropDatabase().catch(() => undefined);
    await this.mongo?.close();
    await Promise.all([this.serviceNats?.close(), this.peerNats?.close()]);
  }

  private servePeers(): void {
    const peers = new Rpc(this.peerNats, this.topology, this.logger);
    peers.serve(billingEndpoints.reserveCredits, async (request) => {
      if (this.billingDown) return new Promise(() => {});
      this.reserveCalls.push(request);
      if (this.released.has(request.jobId)) {
        throw new ServiceError('UNAVAILABLE', 'The reservation was released');
      }
      const already = this.reserved.get(request.jobId);
      if (already !== undefined) return { reserved: already, replayed: true };
      const balance = this.credits.get(request.accountId) ?? 1_000_000;
      if (balance < request.credits) {
        throw new ServiceError('INSUFFICIENT_CREDITS', 'Not enough credits');
      }
      this.credits.set(request.accountId, balance - request.credits);
      this.reserved.set(request.jobId, request.credits);
      // Applied, but the answer is late: the caller may have given up meanwhile.
      if (this.reserveDelayMs > 0) await sleep(this.reserveDelayMs);
      return { reserved: request.credits, replayed: false };
    });
    // Like billing's: gives a reservation back once, and turns away one that comes later.
    peers.serve(billingEndpoints.refundCredits, async (request) => {
      if (this.billingDown) return new Promise(() => {});
      this.refundCalls.push(request);
      const reserved = this.reserved.get(request.jobId);
      if (reserved === undefined) {
        this.released.add(request.jobId);
        return { refunded: 0, replayed: false };
      }
      const replayed = this.refunded.has(request.jobId);
      if (!replayed) {
        this.refunded.add(request.jobId);
        const balance = this.credits.get(request.accountId) ?? 1_000_000;
        this.credits.set(request.accountId, balance + reserved);
      }
      return { refunded: reserved, replayed };
    });
    peers.serve(uploadEndpoints.consumeUpload, async (request) => {
      const upload = this.uploads.get(request.uploadId);
      if (upload === undefined || upload.accountId !== request.accountId) {
        throw new ServiceError('UPLOAD_NOT_FOUND', 'No such upload');
      }
      const { accountId: _owner, ...consumed } = upload;
      return consumed;
    });
  }

  /**
   * An inline worker for `pipeline` answering with `answer(work)` as sent on the wire (fields
   * with a default may be left out, as older workers do); unsubscribe when done.
   */
  serveInline(
    pipeline: 'image' | 'text',
    answer: (work: JobWorkMessage) => Promise<z.input<typeof inlineWorkReply>>,
  ): Subscription {
    return this.peerNats.subscribe(this.topology.subjects.inline[pipeline], {
      queue: `worker-${pipeline}`,
      callback: (_error, message: Msg) => {
        void answer(message.json<JobWorkMessage>()).then((reply) =>
          message.respond(JSON.stringify(reply)),
        );
      },
    });
  }

  addUpload(accountId: string, filename: string, size: number, contentType: string): string {
    const uploadId = newId('upload');
    this.uploads.set(uploadId, {
      accountId,
      uploadId,
      key: `uploads/${accountId}/${uploadId}`,
      size,
      contentType,
      filename,
    });
    return uploadId;
  }

  createJob(request: CreateJobInput, options: { deadline?: number } = {}) {
    return this.rpc.call(jobEndpoints.createJob, request, { timeoutMs: 20_000, ...options });
  }

  /** Every message stored in a stream (read by sequence, so it works on work-queue streams). */
  async streamMessages(
    stream: string,
  ): Promise<{ subject: string; msgId: string | undefined; body: Record<string, unknown> }[]> {
    const { state } = await this.jsm.streams.info(stream);
    const messages = [];
    for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
      const stored = await this.jsm.streams.getMessage(stream, { seq }).catch(() => null);
      if (stored === null) continue;
      messages.push({
        subject: stored.subject,
        msgId: stored.header?.get('Nats-Msg-Id') || undefined,
        body: stored.json<Record<string, unknown>>(),
      });
    }
    return messages;
  }

  /**
   * The sum of a metric's samples carrying `labels` (among others), 0 when there is none yet;
   * `name` as exposed, so a histogram's count is `<name>_count`.
   */
  async metricValue(name: string, labels: Record<string, string>): Promise<number> {
    let total = 0;
    for (const metric of await this.metrics.getMetricsAsJSON()) {
      for (const sample of metric.values) {
        const matches = Object.entries(labels).every(
          ([key, value]) => sample.labels[key] === value,
        );
        // A histogram's samples name their series (`_bucket`, `_sum`, `_count`).
        const series = 'metricName' in sample ? sample.metricName : metric.name;
        if (series === name && matches) total += sample.value;
      }
    }
    return total;
  }

  /** What a worker sends when it starts attempt `attempt` of a queued (audio) job. */
  beginAttempt(jobId: string, attempt: number) {
    return this.rpc.call(jobEndpoints.beginAttempt, {
      jobId,
      attempt,
      worker: 'worker-audio-test',
    });
  }

  /** What a worker sends when attempt `attempt` of a queued (audio) job succeeded. */
  completeAttempt(jobId: string, attempt: number, outputKey: string | null = null) {
    return this.rpc.call(jobEndpoints.completeJob, {
      jobId,
      attempt,
      outputKey,
      outputText: null,
      metrics: {
        inputSize: 1000,
        outputSize: 300,
        compressionRatio: 1,
        operationsApplied: ['encode'],
        processingMs: 40,
        durationSecIn: 3,
      },
      usage: { inputBytes: 1000, audioSeconds: 3 },
    });
  }

  /** The job as stored, read on the service's own database. */
  storedJob(jobId: string): Promise<JobDocument | null> {
    return this.db.collection<JobDocument>(JOBS_COLLECTION).findOne({ _id: jobId });
  }

  /** Whether the creation of `jobId` still has its admission open (not finished, or not yet closed). */
  async admissionOpen(jobId: string): Promise<boolean> {
    const admissions = this.db.collection<{ _id: string }>(ADMISSIONS_COLLECTION);
    return (await admissions.countDocuments({ _id: jobId })) === 1;
  }

  async workFor(jobId: string) {
    const all = await this.streamMessages(this.topology.streams.jobs.name);
    return all.filter((message) => message.body.jobId === jobId);
  }

  async eventsFor(jobId: string) {
    const all = await this.streamMessages(this.topology.streams.events.name);
    return all.filter((message) => message.body.jobId === jobId);
  }
}

/**
 * How a test waits for what the service writes behind its answer (outbox flags and closed
 * admissions gather for kit's WRITE_BEHIND_LINGER_MS): polled, with room for a loaded machine.
 */
export const CONFIRMED = { timeout: 10_000, interval: 50 };

export function newAccount(): string {
  return newId('account');
}

/** A createJob request of `pipeline` with nothing optional set; `extra` overrides any field. */
function request(
  accountId: string,
  pipeline: CreateJobInput['pipeline'],
  operations: CreateJobInput['operations'],
  source: CreateJobInput['source'],
  extra: Partial<CreateJobInput>,
): CreateJobInput {
  return {
    jobId: newId('job'),
    accountId,
    pipeline,
    operations,
    source,
    webhookUrl: null,
    idempotencyKey: null,
    requestHash: `hash-${pipeline}`,
    maxUploadBytes: 25 * MB,
    ...extra,
  } as CreateJobInput;
}

export function textRequest(accountId: string, text: string, extra: Partial<CreateJobInput> = {}) {
  const trim = [{ type: 'trim' as const, params: { intensity: 50 } }];
  return request(accountId, 'text', trim, { kind: 'text', text }, extra);
}

export function audioRequest(
  accountId: string,
  uploadId: string,
  extra: Partial<CreateJobInput> = {},
) {
  return request(accountId, 'audio', [{ type: 'encode' }], { kind: 'upload', uploadId }, extra);
}

export function imageRequest(
  accountId: string,
  uploadId: string,
  extra: Partial<CreateJobInput> = {},
) {
  const encode = [{ type: 'encode' as const, params: { format: 'webp' as const } }];
  return request(accountId, 'image', encode, { kind: 'upload', uploadId }, extra);
}

export async function errorOf(promise: Promise<unknown>): Promise<ServiceError> {
  const outcome = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!(outcome instanceof ServiceError))
    throw new Error(`expected a ServiceError, got ${outcome}`);
  return outcome;
}
