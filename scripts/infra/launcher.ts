import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { toolPath } from './provision';

/** Where the three servers answer, whoever started them. */
export interface InfrastructureEndpoints {
  natsUrl: string;
  mongoUrl: string;
  s3: { endpoint: string; accessKey: string; secretKey: string; region: string };
}

export interface RunningInfrastructure extends InfrastructureEndpoints {
  /** Process ids of the servers this launcher started (none for external servers). */
  pids: number[];
  stop(): Promise<void>;
}

/** Local development credentials; the servers listen on loopback only. */
const LOCAL_S3_ACCESS_KEY = 'tamp-local';
const LOCAL_S3_SECRET_KEY = 'tamp-local-secret';

export interface LaunchedServer {
  name: string;
  child: ChildProcess;
  logFile: string;
}

/**
 * Starts NATS (JetStream), MinIO and FerretDB (SQLite) on free loopback ports with their data
 * under `dataDir`, waits until each answers, and stops them by their own process ids. A server
 * whose URL is already in the environment (NATS_URL, MONGO_URL, S3_ENDPOINT) is used instead.
 */
export async function launchInfrastructure(options: {
  dataDir: string;
  env?: NodeJS.ProcessEnv;
}): Promise<RunningInfrastructure> {
  const env = options.env ?? process.env;
  const logDir = join(options.dataDir, 'logs');
  await mkdir(logDir, { recursive: true });
  const servers: LaunchedServer[] = [];
  const stop = () => stopServers(servers);

  try {
    const [natsUrl, mongoUrl, s3] = await Promise.all([
      env.NATS_URL ?? startNats(options.dataDir, logDir, servers),
      env.MONGO_URL ?? startFerretDb(options.dataDir, logDir, servers),
      env.S3_ENDPOINT !== undefined
        ? {
            endpoint: env.S3_ENDPOINT,
            accessKey: env.S3_ACCESS_KEY ?? '',
            secretKey: env.S3_SECRET_KEY ?? '',
            region: env.S3_REGION ?? 'us-east-1',
          }
        : startMinio(options.dataDir, logDir, servers),
    ]);
    return { natsUrl, mongoUrl, s3, pids: servers.map((server) => server.child.pid!), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function startNats(
  dataDir: string,
  logDir: string,
  servers: LaunchedServer[],
): Promise<string> {
  const [port, monitorPort] = await Promise.all([freePort(), freePort()]);
  const server = launch(
    servers,
    logDir,
    'nats',
    toolPath('nats-server'),
    [
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
    {},
  );
  await waitUntil(server, () =>
    httpOk(`http://127.0.0.1:${monitorPort}/healthz?js-enabled-only=true`),
  );
  return `nats://127.0.0.1:${port}`;
}

async function startFerretDb(
  dataDir: string,
  logDir: string,
  servers: LaunchedServer[],
): Promise<string> {
  const port = await freePort();
  const directory = join(dataDir, 'ferretdb');
  await mkdir(directory, { recursive: true });
  const server = launch(
    servers,
    logDir,
    'ferretdb',
    toolPath('ferretdb'),
    [
      '--handler=sqlite',
      // WAL is FerretDB's default; NORMAL syncs at checkpoints instead of on every commit (~30 %
      // faster writes here). A power loss may drop the last commits but never corrupts: right
      // for development and test data, which is all this launcher serves.
      `--sqlite-url=file:${directory}/?_pragma=synchronous(NORMAL)`,
      `--state-dir=${directory}`,
      `--listen-addr=127.0.0.1:${port}`,
      // The debug HTTP server would take a fixed port and collide between parallel stacks.
      '--debug-addr=-',
      '--telemetry=disable',
      '--log-level=warn',
    ],
    {},
  );
  await waitUntil(server, () => tcpOpen(port));
  return `mongodb://127.0.0.1:${port}/`;
}

async function startMinio(
  dataDir: string,
  logDir: string,
  servers: LaunchedServer[],
): Promise<InfrastructureEndpoints['s3']> {
  const [port, consolePort] = await Promise.all([freePort(), freePort()]);
  const server = launch(
    servers,
    logDir,
    'minio',
    toolPath('minio'),
    [
      'server',
      join(dataDir, 'minio'),
      '--address',
      `127.0.0.1:${port}`,
      '--console-address',
      `127.0.0.1:${consolePort}`,
      '--quiet',
    ],
    {
      MINIO_ROOT_USER: LOCAL_S3_ACCESS_KEY,
      MINIO_ROOT_PASSWORD: LOCAL_S3_SECRET_KEY,
      // No update checks, no call-home, no browser console: nothing leaves the machine.
      MINIO_UPDATE: 'off',
      MINIO_CALLHOME_ENABLE: 'off',
      MINIO_BROWSER: 'off',
      MINIO_PROMETHEUS_AUTH_TYPE: 'public',
    },
  );
  await waitUntil(server, () => httpOk(`http://127.0.0.1:${port}/minio/health/ready`));
  return {
    endpoint: `http://127.0.0.1:${port}`,
    accessKey: LOCAL_S3_ACCESS_KEY,
    secretKey: LOCAL_S3_SECRET_KEY,
    region: 'us-east-1',
  };
}

export function launch(
  servers: LaunchedServer[],
  logDir: string,
  name: string,
  file: string,
  args: string[],
  extraEnv: Record<string, string>,
): LaunchedServer {
  const logFile = join(logDir, `${name}.log`);
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(file, args, {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Own process group: a terminal's Ctrl-C reaches only the launcher, which stops servers
    // after the services that use them, instead of everything dying at once.
    detached: true,
  });
  killOnExit(child);
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const server = { name, child, logFile };
  servers.push(server);
  return server;
}

const START_TIMEOUT_MS = 60_000;

export async function waitUntil(
  server: LaunchedServer,
  probe: () => Promise<boolean>,
  timeoutMs = START_TIMEOUT_MS,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      throw new Error(`${server.name} exited during start-up:\n${await tail(server.logFile)}`);
    }
    if (await probe()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(
    `${server.name} did not answer within ${timeoutMs} ms:\n${await tail(server.logFile)}`,
  );
}

async function stopServers(servers: LaunchedServer[]): Promise<void> {
  await Promise.all(servers.map((server) => stopProcess(server.child)));
}

const children = new Set<ChildProcess>();

/**
 * Children in their own process groups outlive a launcher that crashes; this last-resort hook
 * kills whatever is still running when the launcher's process exits for any reason.
 */
export function killOnExit(child: ChildProcess): void {
  if (children.size === 0) {
    process.once('exit', () => {
      for (const running of children) running.kill('SIGKILL');
    });
  }
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/** SIGTERM, then SIGKILL if the process has not exited in time. */
export async function stopProcess(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        resolve(typeof address === 'object' && address !== null ? address.port : 0),
      );
    });
  });
}

export async function httpOk(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    return response.ok;
  } catch {
    return false;
  }
}

export function tcpOpen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export async function tail(file: string, lines = 20): Promise<string> {
  try {
    return (await readFile(file, 'utf8')).split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
