import { randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import {
  connectMongo,
  connectNats,
  type EndpointRequest,
  type MongoClient,
  type NatsConnection,
  provisionIndexes,
  provisionTopology,
  Rpc,
} from '@tamp/kit';
import {
  billingEndpoints,
  createTopology,
  type JobEvent,
  newId,
  ServiceError,
  type Topology,
} from '@tamp/proto';
import type { CommandStartedEvent, Db } from 'mongodb';
import { pino } from 'pino';
import { expect } from 'vitest';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import { BILLING_INDEXES } from '../src/adapters/documents';
import { billingSettingsFrom, configSchema } from '../src/config';
import { startBillingService } from '../src/service';

const MINUTE_MS = 60_000;
export const SESSION_TTL_MS = 12 * 60 * MINUTE_MS;
export const SIGN_IN_LINK_TTL_MS = 15 * MINUTE_MS;

/**
 * The billing service itself against the real NATS and MongoDB servers, in this file's isolated
 * namespace and database, with a clock the tests move. Tests talk to it over RPC as its peers do,
 * and publish job events to the stream it consumes.
 */
export class BillingHarness {
  readonly infrastructure = isolatedInfrastructure();
  readonly logger = pino({ level: 'silent' });
  /** What billing takes as now: it only moves when a test moves it. */
  clock: Date;
  topology!: Topology;
  db!: Db;
  private mongo!: MongoClient;
  private serverNats!: NatsConnection;
  /** The callers' side: a connection of its own, as the gateway and the job service have. */
  private clientNats!: NatsConnection;
  private rpc!: Rpc;
  private billing!: { stop(): Promise<void> };

  /** @param clockStart where the clock starts, and where resetClock puts it back. */
  constructor(readonly clockStart: Date) {
    this.clock = clockStart;
  }

  /** `onCommandStarted` sees every command billing sends to MongoDB (command monitoring on). */
  async start(
    options: { onCommandStarted?: (event: CommandStartedEvent) => void } = {},
  ): Promise<this> {
    const { infrastructure, logger } = this;
    this.topology = createTopology(infrastructure.namespace);
    this.serverNats = await connectNats({ url: infrastructure.natsUrl, name: 'billing', logger });
    this.clientNats = await connectNats({ url: infrastructure.natsUrl, name: 'client', logger });
    await provisionTopology(this.serverNats, this.topology, 1);
    const connection = await connectMongo({
      url: infrastructure.mongoUrl,
      database: infrastructure.database,
      appName: 'billing',
      ...(options.onCommandStarted ? { monitorCommands: true } : {}),
    });
    this.mongo = connection.client;
    this.db = connection.db;
    if (options.onCommandStarted) this.mongo.on('commandStarted', options.onCommandStarted);
    await provisionIndexes(this.db, BILLING_INDEXES);
    this.billing = await startBillingService({
      nats: this.serverNats,
      topology: this.topology,
      db: this.db,
      logger,
      settings: {
        ...billingSettingsFrom(configSchema.parse(this.infrastructure.serviceEnv)),
        secretsEncryptionKey: randomBytes(32),
        dashboardSessionTtlMs: SESSION_TTL_MS,
        signInLinkTtlMs: SIGN_IN_LINK_TTL_MS,
      },
      clock: () => this.clock,
    });
    this.rpc = new Rpc(this.clientNats, this.topology, logger);
    return this;
  }

  /** Safe after a start that failed part way: it closes what was opened. */
  async stop(): Promise<void> {
    await this.billing?.stop();
    await Promise.all([this.serverNats?.close(), this.clientNats?.close(), this.mongo?.close()]);
  }

  /**
   * An RPC call to billing, waiting well beyond the 5-second default: some tests send hundreds
   * of calls at once, and a slow machine must not turn them into UNAVAILABLE.
   */
  readonly call: Rpc['call'] = (endpoint, request) =>
    this.rpc.call(endpoint, request, { timeoutMs: 30_000 });

  /** A new account (with its first API key), through billing's own createAccount. */
  createAccount(request: EndpointRequest<typeof billingEndpoints.createAccount> = {}) {
    return this.call(billingEndpoints.createAccount, request);
  }

  moveClockTo(msAfterStart: number): void {
    this.clock = new Date(this.clockStart.getTime() + msAfterStart);
  }

  resetClock(): void {
    this.clock = this.clockStart;
  }

  /**
   * A job event as the job service publishes it, at the harness's now unless overridden;
   * a completed text job of 10 input bytes, or a failed one, by default.
   */
  jobEvent(
    accountId: string,
    kind: 'job.completed' | 'job.failed',
    overrides: Partial<JobEvent> = {},
  ): JobEvent {
    const completed = kind === 'job.completed';
    return {
      event: kind,
      jobId: newId('job'),
      accountId,
      pipeline: 'text',
      status: completed ? 'completed' : 'failed',
      inline: false,
      webhookUrl: null,
      result: null,
      error: completed ? null : 'boom',
      usage: completed ? { inputBytes: 10 } : null,
      createdAt: this.clock.toISOString(),
      completedAt: this.clock.toISOString(),
      ...overrides,
    };
  }

  /** `msgID` is JetStream's deduplication id: the job service's, unless a test sends a copy. */
  async publish(event: JobEvent, msgID = `${event.jobId}:${event.event}`): Promise<void> {
    const subject =
      event.event === 'job.completed'
        ? this.topology.subjects.events.completed
        : this.topology.subjects.events.failed;
    await jetstream(this.clientNats).publish(subject, JSON.stringify(event), { msgID });
  }

  /**
   * Waits until the `billing` consumer has acknowledged everything published so far: billing
   * handles events asynchronously, so what they change is only there to read after this.
   */
  async eventsSettled(): Promise<void> {
    const manager = await jetstreamManager(this.clientNats);
    await expect
      .poll(
        async () => {
          const info = await manager.consumers.info(this.topology.streams.events.name, 'billing');
          return info.num_pending + info.num_ack_pending;
        },
        { timeout: 20_000, interval: 100 },
      )
      .toBe(0);
  }
}

/** The ServiceError a call was refused with; the test fails if it succeeded or threw another. */
export async function failure(promise: Promise<unknown>): Promise<ServiceError> {
  const error = await promise.then(
    () => new Error('expected a failure'),
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ServiceError);
  return error as ServiceError;
}
