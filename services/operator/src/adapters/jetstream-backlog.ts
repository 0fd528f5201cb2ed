import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  jetstreamManager,
} from '@nats-io/jetstream';
import { connectNats, type NatsConnection } from '@tamp/kit';
import { jitteredDelayMs, type Pipeline, type Topology, WORKER_SERVICES } from '@tamp/proto';
import type { Logger } from 'pino';
import type { BacklogReading } from '../domain/plan';

/** The next try of a first connection comes within this (equal jitter, proto's backoff.ts). */
const RECONNECT_DELAY_MS = 2_000;

/**
 * Reads a pipeline consumer's backlog (pending + unacknowledged) through the JetStream API,
 * from the consumer names of the topology the services provision. It never creates or changes
 * a stream or consumer: a missing one is reported as such, not papered over.
 *
 * The first connection is made in the background and retried: an operator started while NATS
 * is down still runs, keeps every pool's replicas and says why in their status.
 */
export class JetStreamBacklog {
  private connection: NatsConnection | undefined;
  private manager: JetStreamManager | undefined;
  private connected = false;
  private stopped = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: {
      url: string;
      topology: Topology;
      timeoutMs: number;
      logger: Logger;
    },
  ) {}

  start(): void {
    void this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    const connection = this.connection;
    if (connection === undefined || connection.isClosed()) return;
    await connection.close();
  }

  async read(pipeline: Pipeline): Promise<BacklogReading> {
    const consumer = this.options.topology.consumers[WORKER_SERVICES[pipeline]];
    const where = `consumer ${consumer.durableName} of stream ${consumer.stream}`;
    if (this.manager === undefined || !this.connected) {
      return { available: false, reason: 'NatsUnavailable', message: 'NATS is not reachable' };
    }
    try {
      const info = await this.manager.consumers.info(consumer.stream, consumer.durableName);
      return { available: true, pending: info.num_pending, ackPending: info.num_ack_pending };
    } catch (error) {
      return unreadable(error, where);
    }
  }

  private async connect(): Promise<void> {
    const { url, logger, timeoutMs } = this.options;
    try {
      const connection = await connectNats({ url, name: 'operator', logger });
      if (this.stopped) {
        await connection.close();
        return;
      }
      this.connection = connection;
      this.manager = await jetstreamManager(connection, { timeout: timeoutMs, checkAPI: false });
      this.connected = true;
      void this.followStatus(connection);
    } catch (error) {
      if (this.stopped) return;
      logger.warn({ err: error }, 'NATS not reachable; retrying');
      this.retryTimer = setTimeout(
        () => void this.connect(),
        jitteredDelayMs(RECONNECT_DELAY_MS, Math.random),
      );
    }
  }

  /** A request while disconnected would wait for its timeout; answer at once instead. */
  private async followStatus(connection: NatsConnection): Promise<void> {
    for await (const status of connection.status()) {
      if (status.type === 'disconnect') this.connected = false;
      if (status.type === 'reconnect') this.connected = true;
    }
  }
}

/**
 * Why a backlog could not be read. Reachable NATS that refuses the read (JetStream off for the
 * account, a permission missing, any other JetStream API error) is ConsumerUnreadable; a
 * missing stream or consumer is ConsumerNotFound; everything else (timeouts, a lost
 * connection) is NatsUnavailable.
 */
function unreadable(error: unknown, where: string): BacklogReading {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof JetStreamApiError) {
    const missing =
      error.code === JetStreamApiCodes.ConsumerNotFound ||
      error.code === JetStreamApiCodes.StreamNotFound;
    if (missing) {
      return { available: false, reason: 'ConsumerNotFound', message: `${where} not found` };
    }
  }
  if (error instanceof JetStreamApiError || refusedByNats(error)) {
    return {
      available: false,
      reason: 'ConsumerUnreadable',
      message: `${where} cannot be read: ${message}`,
    };
  }
  return {
    available: false,
    reason: 'NatsUnavailable',
    message: `${where} cannot be read: ${message}`,
  };
}

/** JetStream not enabled for the account, or a permission violation, anywhere in the causes. */
function refusedByNats(error: unknown): boolean {
  let cause = error;
  for (let depth = 0; depth < 8 && cause instanceof Error; depth++, cause = cause.cause) {
    if (cause.name === 'JetStreamNotEnabled' || cause.name === 'PermissionViolationError') {
      return true;
    }
  }
  return false;
}
