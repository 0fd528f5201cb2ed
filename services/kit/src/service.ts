import {
  createTopology,
  jitteredDelayMs,
  STORAGE_LIFECYCLE_RULES,
  type Topology,
} from '@tamp/proto';
import type { Db } from 'mongodb';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { z } from 'zod';
import {
  ConfigError,
  loadConfig,
  type MongoEnv,
  type NatsEnv,
  objectStoreConfigFrom,
  type S3Env,
  type ServiceEnv,
} from './config';
import { createLogger } from './logger';
import { createMetricsRegistry } from './metrics';
import {
  connectMongo,
  connectMongoClient,
  type IndexSpecification,
  provisionIndexes,
} from './mongo';
import { connectNats, type NatsConnection, provisionTopology, streamReplicasFor } from './nats';
import { ObjectStore } from './object-store';
import { OpsServer } from './ops-server';
import { Rpc } from './rpc';
import { Shutdown } from './shutdown';
import { startTracing } from './tracing';

/**
 * What a running service gets: its parsed config, logger, metrics and lifecycle, plus
 * connectors that register their own readiness check and shutdown step, so every service
 * drains and closes its dependencies the same way. The connectors are bound functions, so a
 * `start` takes what it uses apart: `start({ config, connectNats })`.
 */
export class ServiceContext<Config extends ServiceEnv> {
  constructor(
    readonly name: string,
    readonly config: Config,
    readonly logger: Logger,
    readonly metrics: Registry,
    readonly ops: OpsServer,
    readonly shutdown: Shutdown,
  ) {}

  /**
   * Connects to NATS and provisions the namespace's streams and consumers (idempotent), with the
   * replica count NATS_STREAM_REPLICAS means on the cluster reached (`streamReplicas`, which a
   * service's own key-value buckets use too).
   */
  readonly connectNats = async (
    env: NatsEnv,
  ): Promise<{ nats: NatsConnection; topology: Topology; rpc: Rpc; streamReplicas: number }> => {
    const topology = createTopology(env.NATS_NAMESPACE);
    const nats = await connectNats({ url: env.NATS_URL, name: this.name, logger: this.logger });
    this.shutdown.register('nats', async () => {
      if (nats.isClosed()) return;
      // A broker that is already gone cannot be drained; closing is all that is left.
      await nats.drain().catch(() => nats.close());
    });
    // A round trip to the server: false while it is paused, restarting or unreachable.
    this.ops.addReadinessCheck('nats', async () => {
      if (nats.isClosed()) throw new Error('NATS connection closed');
      await nats.flush();
    });
    const streamReplicas = streamReplicasFor(env.NATS_STREAM_REPLICAS, nats.info);
    this.logger.info({ streamReplicas, cluster: nats.info?.cluster }, 'stream replicas');
    await withRetries(() => provisionTopology(nats, topology, streamReplicas));
    return { nats, topology, rpc: new Rpc(nats, topology, this.logger), streamReplicas };
  };

  readonly connectMongo = async (
    env: MongoEnv,
    indexes: readonly IndexSpecification[] = [],
  ): Promise<Db> => {
    const { MONGO_URL: url, MONGO_DATABASE: database } = env;
    const { client, db, serialized } = await connectMongo({ url, database, appName: this.name });
    this.shutdown.register('mongo', () => client.close());
    // On FerretDB the service's own connection is a queue: a ping there would measure the
    // queue, not the server. Readiness asks over a connection of its own.
    const probe = serialized
      ? await this.openMongoClient(url, `${this.name}-readiness`, 'mongo-readiness')
      : client;
    // A read of one of the service's own collections: FerretDB answers `ping` itself, even while
    // the PostgreSQL behind it is down, so only a read shows the database is really there.
    const collection = indexes[0]?.collection;
    this.ops.addReadinessCheck('mongo', async () => {
      const probeDb = probe.db(database);
      if (collection === undefined) await probeDb.command({ ping: 1 });
      else await probeDb.collection(collection).findOne({}, { projection: { _id: 1 } });
    });
    await provisionIndexes(db, indexes);
    return db;
  };

  /**
   * A pooled connection for reads that need no serialization (public reads of a document's
   * current state). On FerretDB `connectMongo` funnels every operation through one connection
   * so guarded updates stay atomic; reads do not need that, and would otherwise queue behind
   * every write. Never use it for a read that decides a write.
   */
  readonly connectMongoForReads = async (env: MongoEnv): Promise<Db> => {
    const client = await this.openMongoClient(env.MONGO_URL, `${this.name}-reads`, 'mongo-reads');
    return client.db(env.MONGO_DATABASE);
  };

  private async openMongoClient(url: string, appName: string, step: string) {
    const client = await connectMongoClient(url, { appName });
    this.shutdown.register(step, () => client.close());
    return client;
  }

  /**
   * Opens the bucket. With S3_MANAGE_BUCKET (the default) it is created when missing and Tamp's
   * lifecycle rules are merged into its configuration (ObjectStore.provision); without, nothing
   * is created or changed and a missing bucket stops the start.
   */
  readonly openObjectStore = async (env: S3Env): Promise<ObjectStore> => {
    const store = new ObjectStore(objectStoreConfigFrom(env));
    if (env.S3_MANAGE_BUCKET) {
      const provisioned = await withRetries(() => store.provision(STORAGE_LIFECYCLE_RULES));
      if (provisioned.createdBucket || provisioned.lifecycle !== 'unchanged') {
        this.logger.info({ bucket: store.bucket, ...provisioned }, 'bucket provisioned');
      }
    } else if (!(await withRetries(() => store.exists()))) {
      throw new Error(
        `S3 bucket "${store.bucket}" does not exist at ${env.S3_ENDPOINT}. With ` +
          'S3_MANAGE_BUCKET=false the services do not create it: create the bucket (and its ' +
          'lifecycle rules) first, or set S3_MANAGE_BUCKET=true',
      );
    }
    this.ops.addReadinessCheck('s3', () => store.ping());
    return store;
  };
}

/** What a service's start returns: how to stop taking work and finish what is in flight. */
export interface RunningService {
  stop(): Promise<void>;
}

export interface ServiceDefinition<Schema extends z.ZodType<ServiceEnv, unknown>> {
  name: string;
  configSchema: Schema;
  /** Opens the connections the service needs and starts it; null when there is nothing to run. */
  start(context: ServiceContext<z.output<Schema>>): Promise<RunningService | null>;
}

/**
 * Runs a service: parse config (exit 1 naming every problem), then logging, tracing, metrics
 * and the ops server, then the service's own start; SIGTERM/SIGINT shut it down in order.
 */
export async function runService<Schema extends z.ZodType<ServiceEnv, unknown>>(
  definition: ServiceDefinition<Schema>,
): Promise<ServiceContext<z.output<Schema>>> {
  let config: z.output<Schema>;
  try {
    config = loadConfig(definition.name, definition.configSchema);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  const logger = createLogger(definition.name, config.LOG_LEVEL);
  const shutdown = new Shutdown(logger, config.SHUTDOWN_TIMEOUT_MS);
  shutdown.installSignalHandlers();
  const stopTracing = await startTracing({
    service: definition.name,
    endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT,
    logger,
  });
  shutdown.register('tracing', stopTracing);
  const metrics = createMetricsRegistry(definition.name);
  const ops = new OpsServer(metrics);
  const opsPort = await ops.listen(config.OPS_PORT, config.OPS_HOST);
  shutdown.register('ops-server', () => ops.close());
  const context = new ServiceContext(definition.name, config, logger, metrics, ops, shutdown);
  try {
    const service = await definition.start(context);
    // Registered after the connections start opened, so it runs before they close: the service
    // stops taking work and finishes what is in flight while NATS and MongoDB are still there.
    if (service !== null) shutdown.register(definition.name, () => service.stop());
  } catch (error) {
    logger.fatal({ err: error }, 'failed to start');
    await shutdown.run('start failed');
    process.exit(1);
  }
  // Registered last so it runs first: readiness drops before anything closes.
  shutdown.register('readiness', () => ops.markDraining());
  ops.markReady();
  logger.info({ opsPort }, 'started');
  return context;
}

/**
 * Start-up races (several services provisioning the same stream or bucket) settle on a retry;
 * the jitter (proto's backoff.ts) keeps replicas that collided once from colliding again.
 */
async function withRetries<T>(operation: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await operation();
    } catch (error) {
      if (attempt >= attempts) throw error;
      const delay = jitteredDelayMs(200 * attempt, Math.random);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
