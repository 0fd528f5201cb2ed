import { execFile as execFileCallback } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { IMAGE_STORAGE, releaseStorageMount } from './images/build-images';
import { mountsUnder } from './kubernetes/cluster';
import { commandLineMentions, once, stopRecordedProcess } from './kubernetes/processes';
import { launch, stopProcess, waitUntil } from './processes';
import { provisionTools, toolPath } from './provision';

const execFile = promisify(execFileCallback);
type Log = (message: string) => void;

/**
 * A container engine for testcontainers on a machine without Docker: Debian's podman serving
 * the Docker-compatible API (`podman system service`) on a Unix socket in a data folder, over
 * the containers/storage buildah builds the images into (scripts/infra/images), so every image
 * `npm run images` built runs without a registry.
 *
 * Everything of one engine lives in its data folder: containers.conf, storage.conf and
 * registries.conf (the environment names them; nothing under /etc is read or written), its
 * socket, and its own libpod state (the list of its containers, their exit files), so two
 * engines started at once (two test runs) share the images but never see or remove each
 * other's containers.
 *
 * Settings this machine needs:
 * - `default_ulimits`: podman passes the host's open-file and process limits to runc, which
 *   the sandbox refuses to set ("error setting rlimit … operation not permitted"); lower ones
 *   work.
 * - runc and cgroupfs: no systemd runs here, and crun fails on the hybrid cgroup v1 hierarchy.
 * - No reaper: testcontainers' Ryuk image comes from a registry, which is unreachable
 *   (TESTCONTAINERS_RYUK_DISABLED). `stop()` removes every container the engine holds instead,
 *   and the next start on the same data folder removes a crashed run's.
 */
export interface ContainerEngine {
  /** `unix://<data folder>/podman.sock`, for DOCKER_HOST. */
  dockerHost: string;
  socketPath: string;
  /**
   * What a testcontainers client needs: DOCKER_HOST, the reaper switched off, and host
   * networking for @tamp/testcontainers (see its README).
   */
  env: Record<string, string>;
  /** The podman CLI on this engine's configuration (its containers, the shared images). */
  podman(args: string[]): Promise<string>;
  /** Removes every container of the engine, stops the service, leaves no process or mount. */
  stop(): Promise<void>;
}

/**
 * Limits every container gets (`default_ulimits`); a container that asks for its own keeps
 * them.
 */
const DEFAULT_ULIMITS = ['nofile=1024:1024', 'nproc=4096:4096'];

export async function startContainerEngine(options: {
  dataDir: string;
  log?: Log;
}): Promise<ContainerEngine> {
  const log = options.log ?? (() => {});
  const dataDir = resolve(options.dataDir);
  const socketPath = join(dataDir, 'podman.sock');
  // sun_path holds 108 bytes with its terminating NUL.
  if (Buffer.byteLength(socketPath) > 107) {
    throw new Error(`the engine's socket path is too long for a Unix socket: ${socketPath}`);
  }
  await provisionTools('podman', log);
  await mkdir(dataDir, { recursive: true });
  const env = await writeConfiguration(dataDir);
  const podman = async (args: string[]) => {
    const { stdout } = await execFile(toolPath('podman'), args, {
      env,
      maxBuffer: 16 * 1024 * 1024,
      timeout: 120_000,
    });
    return stdout.trim();
  };

  await removeLeftovers(dataDir, podman);
  const storageMountedBefore = (await mountsUnder(IMAGE_STORAGE.root)).length > 0;
  const service = launch([], dataDir, 'podman', toolPath('podman'), serviceArgs(socketPath), env);
  await writeFile(join(dataDir, 'podman.pid'), String(service.child.pid));
  const stop = once(async () => {
    await removeContainers(podman).catch((error: Error) => log(`podman rm: ${error.message}`));
    // It waits for clients to close their kept-alive connections (testcontainers keeps its own
    // open until its process exits); with no container left, killing it loses nothing.
    await stopProcess(service.child, 2_000);
    await stopLeftoverProcesses(dataDir);
    await rm(join(dataDir, 'podman.pid'), { force: true });
    // The storage's overlay folder stays bind-mounted after podman exits; a mount that was
    // there before (a build, another engine) is not this engine's to remove.
    if (!storageMountedBefore) await releaseStorageMount();
  });
  try {
    await waitUntil(service, () => ping(socketPath), 30_000);
  } catch (error) {
    await stop();
    throw error;
  }
  log(`podman serves the Docker API at unix://${socketPath}`);
  return {
    dockerHost: `unix://${socketPath}`,
    socketPath,
    env: {
      DOCKER_HOST: `unix://${socketPath}`,
      TESTCONTAINERS_RYUK_DISABLED: 'true',
      TAMP_TESTCONTAINERS_NETWORK: 'host',
    },
    podman,
    stop,
  };
}

function serviceArgs(socketPath: string): string[] {
  return ['system', 'service', '--time=0', `unix://${socketPath}`];
}

/** The engine's configuration files, and the environment that points podman at them. */
async function writeConfiguration(dataDir: string): Promise<Record<string, string>> {
  const quoted = (value: string) => JSON.stringify(value);
  const files = {
    'containers.conf': [
      '[containers]',
      `default_ulimits = [${DEFAULT_ULIMITS.map(quoted).join(', ')}]`,
      '',
      '[engine]',
      'runtime = "runc"',
      'cgroup_manager = "cgroupfs"',
      'events_logger = "file"',
      `events_logfile_path = ${quoted(join(dataDir, 'events.log'))}`,
      // The engine's own state: which containers it has, their exit files and locks.
      `static_dir = ${quoted(join(dataDir, 'libpod'))}`,
      `tmp_dir = ${quoted(join(dataDir, 'run'))}`,
      `volume_path = ${quoted(join(dataDir, 'volumes'))}`,
      // File locks in tmp_dir rather than one shared-memory segment (/dev/shm/libpod_lock) for
      // every podman of the machine, which an engine's first start would reset under another's
      // running containers, and which would outlive the engine.
      'lock_type = "file"',
      '',
      '[network]',
      `network_config_dir = ${quoted(join(dataDir, 'networks'))}`,
    ],
    'storage.conf': [
      '[storage]',
      `driver = ${quoted(IMAGE_STORAGE.driver)}`,
      `graphroot = ${quoted(IMAGE_STORAGE.root)}`,
      `runroot = ${quoted(IMAGE_STORAGE.runroot)}`,
    ],
    // No registry is searched for a short name: images are named in full.
    'registries.conf': ['unqualified-search-registries = []'],
  };
  for (const [name, lines] of Object.entries(files)) {
    await writeFile(join(dataDir, name), `${lines.join('\n')}\n`);
  }
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/root',
    CONTAINERS_CONF: join(dataDir, 'containers.conf'),
    CONTAINERS_STORAGE_CONF: join(dataDir, 'storage.conf'),
    CONTAINERS_REGISTRIES_CONF: join(dataDir, 'registries.conf'),
  };
}

/** `GET /_ping` on the socket answers OK once the API is served. */
function ping(socketPath: string): Promise<boolean> {
  return new Promise((resolvePing) => {
    const call = request({ socketPath, path: '/_ping', timeout: 1_000 }, (response) => {
      response.resume();
      resolvePing(response.statusCode === 200);
    });
    call.on('error', () => resolvePing(false));
    call.on('timeout', () => call.destroy());
    call.end();
  });
}

/** Every container of this engine, running or not, removed with its storage. */
async function removeContainers(podman: (args: string[]) => Promise<string>): Promise<void> {
  await podman(['rm', '--all', '--force', '--time', '0']);
}

/**
 * A crashed run on this data folder: its service (recorded in podman.pid), its containers
 * (still in the folder's libpod state) and their monitors.
 */
async function removeLeftovers(
  dataDir: string,
  podman: (args: string[]) => Promise<string>,
): Promise<void> {
  const pidFile = join(dataDir, 'podman.pid');
  if (existsSync(pidFile)) {
    await stopRecordedProcess(Number(await readFile(pidFile, 'utf8')), dataDir);
  }
  if (existsSync(join(dataDir, 'libpod'))) await removeContainers(podman);
  await stopLeftoverProcesses(dataDir);
}

/**
 * Processes that name the data folder: conmon, the monitor of each container (its exit
 * command names the engine's state folder), gone once its container is removed; any left is
 * stopped here.
 */
async function stopLeftoverProcesses(dataDir: string): Promise<void> {
  for (const pid of await processesMentioning(dataDir)) await stopRecordedProcess(pid, dataDir);
}

/** Ids of the processes whose command line names `marker`. */
export async function processesMentioning(marker: string): Promise<number[]> {
  const pids = (await readdir('/proc')).filter((entry) => /^\d+$/.test(entry)).map(Number);
  return pids.filter((pid) => pid !== process.pid && commandLineMentions(pid, marker));
}
