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
import { InProcessResponders } from './in-process-responders';
import { createLogger } from './logger';
import { createMetricsRegistry, processMetrics } from './metrics';
import {
  connectMongo,
  connectMongoClient,
  type IndexSpecification,
  provisionIndexes,
} from './mongo';
import {
  connectNats,
  type NatsConnection,
  provisionTopology,
  raiseReplicasAsClusterGrows,
  type StreamReplicas,
  streamReplicasFor,
} from './nats';
import { ObjectStore } from './object-store';
import { OpsServer, type ReadinessChecks } from './ops-server';
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
    readonly ops: ReadinessChecks,
    readonly shutdown: Shutdown,
    /** Set when the process runs several services (runServices): their calls stay in memory. */
    private readonly inProcess?: InProcessResponders,
  ) {}

  /**
   * Connects to NATS and provisions the namespace's streams and consumers (idempotent), with the
   * replica count NATS_STREAM_REPLICAS means on the cluster reached (`streamReplicas`).
   */
  readonly connectNats = async (
    env: NatsEnv,
  ): Promise<{
    nats: NatsConnection;
    topology: Topology;
    rpc: Rpc;
    streamReplicas: StreamReplicas;
  }> => {
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
    // A server that names no cluster cannot grow without a restart, which starts services anew.
    if (env.NATS_STREAM_REPLICAS === 'auto' && nats.info?.cluster !== undefined) {
      void raiseReplicasAsClusterGrows(nats, topology, streamReplicas, this.logger);
    }
    const rpc = new Rpc(nats, topology, this.logger, undefined, this.inProcess);
    return { nats, topology, rpc, streamReplicas };
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
): Promise<void> {
  await runServices(definition.name, [definition]);
}

// biome-ignore lint/suspicious/noExplicitAny: definitions of different configs run side by side
type AnyServiceDefinition = ServiceDefinition<any>;

/**
 * Runs several services in one process, as `runService` runs one (docs/service-layout.md, "One
 * process or one per service"): one ops server whose readiness needs every service's checks
 * (named `<service>.<check>`) and whose metrics carry each service's label, one tracer named
 * `processName`, one shutdown that stops the services (the last started first, then the rest
 * together) before any connection closes. Their request/reply calls to one another stay in memory
 * (InProcessResponders); streams and events still go through NATS. Each service reads its
 * variables from the same environment; OPS_*, LOG_LEVEL and tracing come from the first's.
 */
export async function runServices(
  processName: string,
  definitions: readonly AnyServiceDefinition[],
): Promise<void> {
  const alone = definitions.length === 1;
  const services = loadConfigsOrExit(definitions).map(({ definition, config }) => ({
    definition,
    config,
    metrics: createMetricsRegistry(definition.name, { nodeMetrics: alone }),
  }));
  const first = services[0]?.config;
  if (first === undefined) throw new Error('runServices needs at least one service');
  const logger = createLogger(processName, first.LOG_LEVEL);
  const timeoutMs = Math.max(...services.map(({ config }) => config.SHUTDOWN_TIMEOUT_MS));
  const shutdown = new Shutdown(logger, timeoutMs);
  shutdown.installSignalHandlers();
  const stopTracing = await startTracing({
    service: processName,
    endpoint: first.OTEL_EXPORTER_OTLP_ENDPOINT,
    logger,
  });
  shutdown.register('tracing', stopTracing);
  const ops = new OpsServer(
    processMetrics(
      processName,
      services.map(({ metrics }) => metrics),
    ),
  );
  const opsPort = await ops.listen(first.OPS_PORT, first.OPS_HOST);
  shutdown.register('ops-server', () => ops.close());
  const inProcess = alone ? undefined : new InProcessResponders();
  const started: RunningService[] = [];
  for (const { definition, config, metrics } of services) {
    const context = new ServiceContext(
      definition.name,
      config,
      alone ? logger : createLogger(definition.name, config.LOG_LEVEL),
      metrics,
      alone ? ops : ops.scoped(definition.name),
      shutdown,
      inProcess,
    );
    try {
      const service = await definition.start(context);
      if (service !== null) started.push(service);
    } catch (error) {
      context.logger.fatal({ err: error }, 'failed to start');
      await stopServices(started);
      await shutdown.run('start failed');
      process.exit(1);
    }
  }
  // Registered after every connection opened, so it runs before any closes: the services stop
  // taking work and finish what is in flight while NATS and MongoDB are still there.
  shutdown.register('services', () => stopServices(started));
  // Registered last so it runs first: readiness drops before anything closes.
  shutdown.register('readiness', () => ops.markDraining());
  ops.markReady();
  logger.info({ opsPort, services: definitions.map((definition) => definition.name) }, 'started');
}

/** Every definition with its config, or exit 1 naming every problem of every one. */
function loadConfigsOrExit(
  definitions: readonly AnyServiceDefinition[],
): { definition: AnyServiceDefinition; config: ServiceEnv }[] {
  const problems: string[] = [];
  const loaded: { definition: AnyServiceDefinition; config: ServiceEnv }[] = [];
  for (const definition of definitions) {
    try {
      loaded.push({ definition, config: loadConfig(definition.name, definition.configSchema) });
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(error.message);
    }
  }
  if (problems.length > 0) {
    process.stderr.write(`${problems.join('\n')}\n`);
    process.exit(1);
  }
  return loaded;
}

/**
 * The last started (the gateway, which takes the traffic) first, then the others together, as
 * the local stack stops a process per service: one after another, the workers' waits for their
 * last fetch would add up past the shutdown's time-out.
 */
async function stopServices(started: readonly RunningService[]): Promise<void> {
  const last = started.at(-1);
  await last?.stop();
  await Promise.all(started.slice(0, -1).map((service) => service.stop()));
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
