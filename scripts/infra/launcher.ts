import { type ChildProcess, execFileSync } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { chown, mkdir, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import {
  freePort,
  httpOk,
  postgresUser,
  spawnOwned,
  stopProcess,
  tail,
  tcpOpen,
} from './processes';
import { toolPath } from './provision';

export { freePort, httpOk, stopProcess };

/** Where the three servers answer, whoever started them. */
export interface InfrastructureEndpoints {
  natsUrl: string;
  mongoUrl: string;
  s3: { endpoint: string; accessKey: string; secretKey: string; region: string };
}

/** A server this launcher started, for fault tests and for the next launcher's clean-up. */
export interface ServerProcess {
  name: ServerName;
  /** The program's path; a leftover process is recognised by it. */
  file: string;
  pid(): number | undefined;
  /** Where it serves Prometheus metrics over HTTP, when it does (FerretDB). */
  metricsUrl?: string;
  /** Stops the server; `restart` starts it again. */
  stop(): Promise<void>;
  /** Stops the server and starts it again on the same port with the same data. */
  restart(): Promise<void>;
  /** The file its output goes to. */
  readonly logFile: string;
}

/** `nats` alone, or the first node of a NATS cluster whose others are `nats-2`, `nats-3`, … */
const NATS_NODE_NAMES = ['nats', 'nats-2', 'nats-3', 'nats-4', 'nats-5'] as const;
export type NatsNodeName = (typeof NATS_NODE_NAMES)[number];
export type ServerName = NatsNodeName | 'postgres' | 'ferretdb' | 'minio' | 'otelcol';

export interface RunningInfrastructure extends InfrastructureEndpoints {
  /** The servers this launcher started (none for external servers). */
  servers: Partial<Record<ServerName, ServerProcess>>;
  stop(): Promise<void>;
}

/** Local development credentials; the servers listen on loopback only. */
const LOCAL_S3_ACCESS_KEY = 'tamp-local';
const LOCAL_S3_SECRET_KEY = 'tamp-local-secret';
const START_TIMEOUT_MS = 60_000;

interface ServerDefinition {
  name: ServerName;
  file: string;
  args: string[];
  env?: Record<string, string>;
  user?: string;
  /** True once the server answers. */
  probe: () => Promise<boolean>;
  metricsUrl?: string;
  /** The signal that stops it, from its launcher or at its launcher's death (PostgreSQL: SIGINT,
   * its fast shutdown; SIGTERM waits for every client to leave). */
  stopSignal?: NodeJS.Signals;
}

class LaunchedServer implements ServerProcess {
  private child: ChildProcess | undefined;

  constructor(
    private readonly definition: ServerDefinition,
    readonly logFile: string,
  ) {}

  get name(): ServerName {
    return this.definition.name;
  }

  get file(): string {
    return this.definition.file;
  }

  get metricsUrl(): string | undefined {
    return this.definition.metricsUrl;
  }

  pid(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<void> {
    const { definition } = this;
    const child = spawnOwned(definition.file, definition.args, {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...definition.env },
      user: definition.user,
      deathSignal: definition.stopSignal,
    });
    this.child = child;
    const log = createWriteStream(this.logFile, { flags: 'a' });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${definition.name} exited during start-up:\n${await tail(this.logFile)}`);
      }
      if (await definition.probe()) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(
      `${definition.name} did not answer within ${START_TIMEOUT_MS} ms:\n${await tail(this.logFile)}`,
    );
  }

  async stop(): Promise<void> {
    if (this.child !== undefined) {
      await stopProcess(this.child, 10_000, this.definition.stopSignal ?? 'SIGTERM');
    }
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }
}

/**
 * Starts NATS (JetStream), MinIO and FerretDB on PostgreSQL on free loopback ports with their
 * data under `dataDir`, waits until each answers, and stops them by their own process ids
 * (FerretDB before the PostgreSQL it uses). A server whose URL is already in the environment
 * (NATS_URL, MONGO_URL, S3_ENDPOINT) is used instead.
 */
export async function launchInfrastructure(options: {
  dataDir: string;
  env?: NodeJS.ProcessEnv;
  /** NATS servers: one (the default), or a JetStream cluster of this many, routed on loopback. */
  natsNodes?: number;
}): Promise<RunningInfrastructure> {
  const env = options.env ?? process.env;
  const logDir = join(options.dataDir, 'logs');
  await mkdir(logDir, { recursive: true });
  const servers: Partial<Record<ServerName, LaunchedServer>> = {};
  const launch = async (definition: ServerDefinition) => {
    const server = new LaunchedServer(definition, join(logDir, `${definition.name}.log`));
    servers[definition.name] = server;
    await server.start();
  };
  const stop = async () => {
    await Promise.all([
      ...NATS_NODE_NAMES.map((name) => servers[name]?.stop()),
      servers.minio?.stop(),
      servers.ferretdb?.stop(),
    ]);
    await servers.postgres?.stop();
  };

  try {
    const [natsUrl, mongoUrl, s3] = await Promise.all([
      env.NATS_URL ??
        ((options.natsNodes ?? 1) > 1
          ? startNatsCluster(options.dataDir, launch, options.natsNodes ?? 1)
          : startNats(options.dataDir, launch)),
      env.MONGO_URL ?? startMongoWire(options.dataDir, launch),
      env.S3_ENDPOINT !== undefined
        ? {
            endpoint: env.S3_ENDPOINT,
            accessKey: env.S3_ACCESS_KEY ?? '',
            secretKey: env.S3_SECRET_KEY ?? '',
            region: env.S3_REGION ?? 'us-east-1',
          }
        : startMinio(options.dataDir, launch),
    ]);
    return { natsUrl, mongoUrl, s3, servers, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

type Launch = (definition: ServerDefinition) => Promise<void>;

async function startNats(dataDir: string, launch: Launch): Promise<string> {
  const [port, monitorPort] = await Promise.all([freePort(), freePort()]);
  await launch({
    name: 'nats',
    file: toolPath('nats-server'),
    args: [
      '--jetstream',
      '--store_dir',
      join(dataDir, 'nats'),
      '--addr',
      '127.0.0.1',
      '--port',
      String(port),
      '--http_port',
      String(monitorPort),
      '--server_name',
      'tamp-local',
    ],
    probe: () => httpOk(`http://127.0.0.1:${monitorPort}/healthz?js-enabled-only=true`),
  });
  return `nats://127.0.0.1:${port}`;
}

/**
 * A JetStream cluster of `size` servers on loopback, each routed to every other, named after
 * its ServerName (`nats`, `nats-2`, …) so a test can tell which process leads a stream. They
 * start together: none is healthy before JetStream has a quorum. The URL lists every node.
 */
async function startNatsCluster(dataDir: string, launch: Launch, size: number): Promise<string> {
  if (size > NATS_NODE_NAMES.length)
    throw new Error(`at most ${NATS_NODE_NAMES.length} NATS nodes`);
  const nodes = await Promise.all(
    NATS_NODE_NAMES.slice(0, size).map(async (name) => {
      const [port, routePort, monitorPort] = await Promise.all([
        freePort(),
        freePort(),
        freePort(),
      ]);
      return { name, port, routePort, monitorPort };
    }),
  );
  const routes = nodes.map((node) => `nats-route://127.0.0.1:${node.routePort}`).join(',');
  await Promise.all(
    nodes.map((node) =>
      launch({
        name: node.name,
        file: toolPath('nats-server'),
        args: [
          // Apart from the single server's store: a clustered JetStream does not adopt one.
          ...['--jetstream', '--store_dir', join(dataDir, 'nats-cluster', node.name)],
          ...['--addr', '127.0.0.1', '--port', String(node.port)],
          ...['--http_port', String(node.monitorPort), '--server_name', node.name],
          ...['--cluster_name', 'tamp', '--cluster', `nats://127.0.0.1:${node.routePort}`],
          ...['--routes', routes],
        ],
        probe: () => natsNodeReady(node.monitorPort, size),
      }),
    ),
  );
  return nodes.map((node) => `nats://127.0.0.1:${node.port}`).join(',');
}

/**
 * A node is ready once its JetStream is current with the cluster's meta leader (`/healthz`) and
 * it knows every member's client URL (`/varz`). The first alone passes with two of three nodes
 * routed (a quorum elects the meta leader), and a client connecting then is told of two
 * servers: a cluster handed over must be whole, as `auto` replicas count its members.
 */
async function natsNodeReady(monitorPort: number, size: number): Promise<boolean> {
  if (!(await httpOk(`http://127.0.0.1:${monitorPort}/healthz`))) return false;
  try {
    const response = await fetch(`http://127.0.0.1:${monitorPort}/varz`, {
      signal: AbortSignal.timeout(1_000),
    });
    const varz = (await response.json()) as { connect_urls?: string[] };
    return (varz.connect_urls ?? []).length >= size;
  } catch {
    return false;
  }
}

/**
 * FerretDB 1.24 with its PostgreSQL backend (Debian's PostgreSQL 15), rather than its SQLite
 * one: the SQLite backend pushes a filter down only when it is exactly `{ _id }`, so every
 * guarded update (`{ _id, status, attempts }`) scans and decodes the whole collection, and the
 * cost of each write grows with the number of jobs (measured: 87 ms per guarded update at 3,000
 * jobs, and climbing). The PostgreSQL backend pushes equality filters down and stays at about
 * 2 ms. Both backends are built with Tamp's compare-and-set patches, so an update is atomic
 * per document on either (docs/dependencies.md).
 */
async function startMongoWire(dataDir: string, launch: Launch): Promise<string> {
  const postgresPort = await startPostgres(dataDir, launch);
  const [port, debugPort] = await Promise.all([freePort(), freePort()]);
  const stateDir = join(dataDir, 'ferretdb');
  await mkdir(stateDir, { recursive: true });
  await launch({
    name: 'ferretdb',
    file: toolPath('ferretdb'),
    args: [
      '--handler=postgresql',
      `--postgresql-url=postgres://postgres@127.0.0.1:${postgresPort}/postgres`,
      `--state-dir=${stateDir}`,
      `--listen-addr=127.0.0.1:${port}`,
      // The debug HTTP server (metrics, pprof) on a free loopback port, not its fixed default
      // that parallel stacks would collide on: benchmarks count MongoDB commands from its
      // ferretdb_client_requests_total.
      `--debug-addr=127.0.0.1:${debugPort}`,
      '--telemetry=disable',
      '--log-level=warn',
    ],
    probe: () => tcpOpen(port),
    metricsUrl: `http://127.0.0.1:${debugPort}/debug/metrics`,
  });
  return `mongodb://127.0.0.1:${port}/`;
}

/**
 * A private PostgreSQL cluster in `<dataDir>/postgres`, on loopback only (no Unix socket), with
 * trust authentication: it holds development and test data and no other client can reach it.
 * PostgreSQL refuses to run as root, so a root launcher runs it as the `postgres` user the
 * Debian package creates.
 */
async function startPostgres(dataDir: string, launch: Launch): Promise<number> {
  const directory = join(dataDir, 'postgres');
  const user = postgresUser();
  await mkdir(directory, { recursive: true, mode: 0o700 });
  if (user !== undefined) {
    const { uid, gid } = postgresIds();
    await chown(directory, uid, gid);
  }
  if (!existsSync(join(directory, 'PG_VERSION'))) await initdb(directory, user);
  const port = await freePort();
  await launch({
    name: 'postgres',
    file: toolPath('postgres'),
    args: [
      '-D',
      directory,
      '-h',
      '127.0.0.1',
      '-p',
      String(port),
      '-k',
      '',
      '-c',
      'max_connections=200',
    ],
    env: { LANG: 'C' },
    user,
    probe: () => postgresAccepts(port),
    stopSignal: 'SIGINT',
  });
  return port;
}

async function initdb(directory: string, user: string | undefined): Promise<void> {
  const child = spawnOwned(
    toolPath('initdb'),
    ['-D', directory, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync'],
    { env: { PATH: process.env.PATH ?? '', LANG: 'C' }, user },
  );
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`initdb failed (${code}):\n${output}`);
}

function postgresIds(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }));
  return { uid: id('-u'), gid: id('-g') };
}

/**
 * PostgreSQL opens its port before it finishes starting up; a startup packet answered with
 * anything but "the database system is starting up" means it accepts connections.
 */
async function postgresAccepts(port: number): Promise<boolean> {
  if (!(await tcpOpen(port))) return false;
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const finish = (ready: boolean) => {
      socket.destroy();
      resolve(ready);
    };
    socket.setTimeout(1_000, () => finish(false));
    socket.once('error', () => finish(false));
    socket.once('connect', () => socket.write(startupPacket('postgres', 'postgres')));
    socket.once('data', (data) => {
      // 'R' (authentication: trust answers AuthenticationOk) means ready; 'E' carries an error.
      finish(data[0] === 0x52);
    });
  });
}

function startupPacket(user: string, database: string): Buffer {
  const body = Buffer.from(`user\0${user}\0database\0${database}\0\0`);
  const packet = Buffer.alloc(8 + body.length);
  packet.writeInt32BE(packet.length, 0);
  packet.writeInt32BE(196_608, 4); // protocol 3.0
  body.copy(packet, 8);
  return packet;
}

async function startMinio(dataDir: string, launch: Launch): Promise<InfrastructureEndpoints['s3']> {
  const [port, consolePort] = await Promise.all([freePort(), freePort()]);
  await launch({
    name: 'minio',
    file: toolPath('minio'),
    args: [
      'server',
      join(dataDir, 'minio'),
      '--address',
      `127.0.0.1:${port}`,
      '--console-address',
      `127.0.0.1:${consolePort}`,
      '--quiet',
    ],
    env: {
      MINIO_ROOT_USER: LOCAL_S3_ACCESS_KEY,
      MINIO_ROOT_PASSWORD: LOCAL_S3_SECRET_KEY,
      // No update checks, no call-home, no browser console: nothing leaves the machine.
      MINIO_UPDATE: 'off',
      MINIO_CALLHOME_ENABLE: 'off',
      MINIO_BROWSER: 'off',
      MINIO_PROMETHEUS_AUTH_TYPE: 'public',
    },
    probe: () => httpOk(`http://127.0.0.1:${port}/minio/health/ready`),
  });
  return {
    endpoint: `http://127.0.0.1:${port}`,
    accessKey: LOCAL_S3_ACCESS_KEY,
    secretKey: LOCAL_S3_SECRET_KEY,
    region: 'us-east-1',
  };
}

/** A trace collector this launcher started: where services send OTLP, and where it writes. */
export interface RunningTraceCollector {
  /** For OTEL_EXPORTER_OTLP_ENDPOINT (OTLP over HTTP). */
  endpoint: string;
  /** One OTLP/JSON `TracesData` object per line, appended as batches arrive. */
  spansFile: string;
  stop(): Promise<void>;
}

/**
 * The OpenTelemetry Collector built from pinned modules (scripts/infra/otelcol/main.go):
 * receives OTLP over HTTP on loopback and writes every span to `<dataDir>/spans.jsonl`. Its own
 * telemetry is off, so it opens no other port and sends nothing anywhere.
 */
export async function startTraceCollector(options: {
  dataDir: string;
}): Promise<RunningTraceCollector> {
  await mkdir(options.dataDir, { recursive: true });
  const port = await freePort();
  const spansFile = join(options.dataDir, 'spans.jsonl');
  const configFile = join(options.dataDir, 'otelcol.yaml');
  // JSON is YAML: the collector reads it as its configuration file.
  const config = {
    receivers: { otlp: { protocols: { http: { endpoint: `127.0.0.1:${port}` } } } },
    exporters: { file: { path: spansFile, format: 'json', flush_interval: '100ms' } },
    service: {
      telemetry: { metrics: { level: 'none' }, logs: { level: 'warn' } },
      pipelines: { traces: { receivers: ['otlp'], exporters: ['file'] } },
    },
  };
  await writeFile(configFile, JSON.stringify(config, null, 2));
  const server = new LaunchedServer(
    {
      name: 'otelcol',
      file: toolPath('otelcol'),
      args: [`--config=file:${configFile}`],
      probe: () => tcpOpen(port),
    },
    join(options.dataDir, 'otelcol.log'),
  );
  await server.start();
  return { endpoint: `http://127.0.0.1:${port}`, spansFile, stop: () => server.stop() };
}
