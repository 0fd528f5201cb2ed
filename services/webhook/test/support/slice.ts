import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import {
  connectMongo,
  connectNats,
  type Db,
  type MongoClient,
  type NatsConnection,
  provisionTopology,
  Rpc,
} from '@tamp/kit';
import type { TargetPolicy } from '@tamp/proto';
import {
  billingEndpoints,
  createTopology,
  type JobEvent,
  jobEndpoints,
  messageIds,
  newId,
  ServiceError,
  type Topology,
} from '@tamp/proto';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import type { z } from 'zod';
import { isolatedInfrastructure } from '../../../../test/support/infrastructure';
import { AttemptRepository } from '../../src/adapters/attempt-repository';
import { DeliveryRepository } from '../../src/adapters/delivery-repository';
import { configSchema, type WebhookSettings, webhookSettingsFrom } from '../../src/config';
import {
  startWebhookService,
  type WebhookService,
  type WebhookServiceOptions,
} from '../../src/service';

/**
 * Test-only: one isolated slice (namespace, database) with a webhook service and doubles of
 * billing and the job service.
 */

export type AccountView = z.input<typeof billingEndpoints.getAccount.response>;

export const silentLogger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

export interface Slice {
  topology: Topology;
  db: Db;
  deliveries: DeliveryRepository;
  attempts: AttemptRepository;
  /** The caller side, as the gateway would use it. */
  rpc: Rpc;
  accounts: Map<string, AccountView>;
  /** Billing answers UNAVAILABLE for this account this many more times (a peer outage). */
  billingOutages: Map<string, number>;
  /** How often billing was asked for each account. */
  accountReads: Map<string, number>;
  /** What billing publishes after it changed an account's settings. */
  notifyAccountChanged(accountId: string): Promise<void>;
  /** The job service double's finished jobs: the event each published, by job id. */
  jobEvents: Map<string, JobEvent>;
  /** Starts a webhook service instance on this slice (several may run one after another). */
  startService(
    overrides?: Partial<Omit<WebhookServiceOptions, 'settings'>> & {
      settings?: Partial<WebhookSettings>;
    },
  ): Promise<{
    service: WebhookService;
    metrics: Registry;
  }>;
  publish(event: JobEvent, msgID?: string): Promise<void>;
  close(): Promise<void>;
}

export async function startSlice(defaults: {
  policy: TargetPolicy;
  retryScheduleMs: readonly number[];
  timeoutMs?: number;
}): Promise<Slice> {
  const infrastructure = isolatedInfrastructure();
  const topology = createTopology(infrastructure.namespace);
  const logger = silentLogger;
  const connections: NatsConnection[] = [];
  const nats = async (name: string) => {
    const connection = await connectNats({ url: infrastructure.natsUrl, name, logger });
    connections.push(connection);
    return connection;
  };
  const client = await nats('test-client');
  await provisionTopology(client, topology, 1);
  const mongo: MongoClient[] = [];
  const { client: mongoClient, db } = await connectMongo({
    url: infrastructure.mongoUrl,
    database: infrastructure.database,
    appName: 'webhook-test',
  });
  mongo.push(mongoClient);

  // A test double of the billing service: a real responder on the slice's NATS subjects.
  const accounts = new Map<string, AccountView>();
  const billingOutages = new Map<string, number>();
  const accountReads = new Map<string, number>();
  const billing = await nats('billing-double');
  new Rpc(billing, topology, logger).serve(billingEndpoints.getAccount, async ({ accountId }) => {
    accountReads.set(accountId, (accountReads.get(accountId) ?? 0) + 1);
    const outages = billingOutages.get(accountId) ?? 0;
    if (outages > 0) {
      billingOutages.set(accountId, outages - 1);
      throw new ServiceError('UNAVAILABLE', 'billing is restarting');
    }
    const account = accounts.get(accountId);
    if (account === undefined) throw new ServiceError('NOT_FOUND', 'Account not found');
    return account;
  });
  await billing.flush();

  // A test double of the job service, likewise: the events of finished jobs, as getJobEvent.
  const jobEvents = new Map<string, JobEvent>();
  const jobs = await nats('job-double');
  new Rpc(jobs, topology, logger).serve(jobEndpoints.getJobEvent, async ({ accountId, jobId }) => {
    const event = jobEvents.get(jobId);
    if (event === undefined || event.accountId !== accountId) {
      throw new ServiceError('JOB_NOT_FOUND', `No finished job ${jobId}`);
    }
    return event;
  });
  await jobs.flush();

  const services: WebhookService[] = [];
  return {
    topology,
    db,
    deliveries: new DeliveryRepository(db),
    attempts: new AttemptRepository(db),
    rpc: new Rpc(client, topology, logger),
    accounts,
    billingOutages,
    accountReads,
    async notifyAccountChanged(accountId) {
      billing.publish(
        topology.subjects.accountNotification(accountId),
        JSON.stringify({ accountId }),
      );
      await billing.flush();
    },
    jobEvents,
    async startService({ settings, ...overrides } = {}) {
      const connection = await nats('webhook');
      const metrics = new Registry();
      const service = await startWebhookService({
        nats: connection,
        topology,
        rpc: new Rpc(connection, topology, logger),
        db,
        settings: {
          ...webhookSettingsFrom(configSchema.parse(infrastructure.serviceEnv)),
          targetPolicy: defaults.policy,
          retryScheduleMs: defaults.retryScheduleMs,
          timeoutMs: defaults.timeoutMs ?? 2_000,
          pollIntervalMs: 25,
          ...settings,
        },
        logger,
        metrics,
        ...overrides,
      });
      services.push(service);
      return { service, metrics };
    },
    async publish(event, msgID = messageIds.event(event.jobId, event.event)) {
      const subject =
        event.event === 'job.completed'
          ? topology.subjects.events.completed
          : topology.subjects.events.failed;
      await jetstream(client).publish(subject, JSON.stringify(event), { msgID });
    },
    async close() {
      for (const service of services) await service.stop();
      const manager = await jetstreamManager(client);
      for (const stream of Object.values(topology.streams)) {
        await manager.streams.delete(stream.name).catch(() => false);
      }
      await db.dropDatabase().catch(() => {});
      for (const connection of connections) await connection.close();
      for (const connection of mongo) await connection.close();
    },
  };
}

export function account(overrides: Partial<AccountView> & { webhookSecret: string }): AccountView {
  return {
    accountId: newId('account'),
    plan: 'pro',
    maxUploadBytes: 50_000_000,
    rateLimitPerMinute: 600,
    webhookUrl: null,
    billingCycleAnchor: null,
    createdAt: '2026-01-01T00:00:00.000Z',
    credits: { allowanceRemaining: 100, grantedRemaining: 0, available: 100 },
    ...overrides,
  };
}

export function completedEvent(
  accountId: string,
  webhookUrl: string | null,
  overrides: Partial<JobEvent> = {},
): JobEvent {
  const jobId = newId('job');
  return {
    event: 'job.completed',
    jobId,
    accountId,
    pipeline: 'image',
    status: 'completed',
    inline: false,
    webhookUrl,
    result: {
      outputKey: `results/${accountId}/${jobId}/result.webp`,
      metrics: {
        inputSize: 2_000_000,
        outputSize: 500_000,
        compressionRatio: 4,
        operationsApplied: ['resize', 'encode'],
        processingMs: 120,
      },
    },
    error: null,
    usage: { inputBytes: 2_000_000, megapixels: 3.1 },
    createdAt: '2026-11-21T12:00:00.000Z',
    completedAt: '2026-11-21T12:00:03.250Z',
    ...overrides,
  };
}

export function failedEvent(accountId: string, webhookUrl: string | null): JobEvent {
  return completedEvent(accountId, webhookUrl, {
    event: 'job.failed',
    pipeline: 'audio',
    status: 'failed',
    result: null,
    error: 'ffmpeg could not decode the input',
    usage: null,
  });
}

/** Polls until `condition` holds; fails naming `what` after `withinMs`. */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  what: string,
  withinMs = 15_000,
): Promise<NonNullable<T>> {
  const giveUpAt = Date.now() + withinMs;
  for (;;) {
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (Date.now() > giveUpAt) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
