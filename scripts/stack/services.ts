import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { recommendedImageWorkerEnv } from '../../services/worker-image/src/adapters/sharp-runtime';
import { bundleServices } from '../build/bundle';
import type { InfrastructureEndpoints } from '../infra/launcher';
import { freePort, httpOk, spawnOwned, stopProcess } from '../infra/processes';
import { PROJECT_ROOT, toolPath } from '../infra/provision';
import { startRoundRobinProxy } from './round-robin-proxy';

import { SERVICE_NAMES, type ServiceName } from './service-names';

export { SERVICE_NAMES, type ServiceName };

/** A process per service (as the chart deploys them), or one process for every service. */
export const PROCESS_MODELS = ['per-service', 'single'] as const;
export type ProcessModel = (typeof PROCESS_MODELS)[number];

/** The process model a flag or variable names (unset: per-service). */
export function processModelOf(value: string | undefined): ProcessModel {
  if (value === undefined || value === '') return 'per-service';
  const model = PROCESS_MODELS.find((known) => known === value);
  if (model === undefined) throw new Error(`processes must be ${PROCESS_MODELS.join(' or ')}`);
  return model;
}

/** The one process of `processes: 'single'`, which runs every service. */
export const SINGLE_PROCESS = 'tamp';
export type ProcessName = ServiceName | typeof SINGLE_PROCESS;

export interface RunningService {
  /** The service, or SINGLE_PROCESS for the process that runs all of them. */
  name: ProcessName;
  /** Which process of the service: 1, or 1 to `replicas` (ServicesOptions). */
  replica: number;
  opsPort: number;
  pid(): number | undefined;
  restarts: number;
}

export interface RunningServices {
  services: RunningService[];
  publicUrl: string;
  adminUrl: string;
  waitUntilReady(timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

export interface ServicesOptions {
  infrastructure: InfrastructureEndpoints;
  publicPort: number;
  adminPort: number;
  /** Extra variables for every service (overrides the composed ones). */
  env?: Record<string, string | undefined>;
  /** One call per output line of any service. */
  onLine?: (service: ProcessName, line: string) => void;
  /**
   * `source` (default) runs `services/<name>/src/main.ts` through tsx; `bundle` builds
   * `dist/<name>/main.mjs` (scripts/build/bundle.ts, about a second) and runs it with plain
   * node, as a container does: leaner by the transpiler's ~60 MiB per process, so memory is
   * measured that way.
   */
  runtime?: 'source' | 'bundle';
  /**
   * Processes per service (default 1). With more, the gateway's replicas listen on ports of
   * their own behind a round-robin proxy on `publicPort` and `adminPort`, as a Kubernetes
   * Service spreads connections over pods.
   */
  replicas?: number;
  /**
   * `per-service` (default): a process per service, as the chart deploys them. `single`: one
   * process runs every service (scripts/stack/single-process.ts), their calls to one another in
   * memory; source runtime only.
   */
  processes?: ProcessModel;
}

/**
 * Runs each service as its own Node process, restarting one that dies (as Kubernetes would)
 * with a growing delay, until `stop()`.
 */
export async function startServices(options: ServicesOptions): Promise<RunningServices> {
  const { infrastructure } = options;
  if (options.runtime === 'bundle') await bundleServices();
  const shared: Record<string, string | undefined> = {
    ...process.env,
    NATS_URL: infrastructure.natsUrl,
    MONGO_URL: infrastructure.mongoUrl,
    S3_ENDPOINT: infrastructure.s3.endpoint,
    S3_ACCESS_KEY: infrastructure.s3.accessKey,
    S3_SECRET_KEY: infrastructure.s3.secretKey,
    S3_REGION: infrastructure.s3.region,
    OPS_HOST: '127.0.0.1',
    HOST: '127.0.0.1',
    // The local stack lets a developer receive webhooks on their own machine.
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8,::1/128',
    ...options.env,
  };
  let stopping = false;
  const replicas = options.replicas ?? 1;
  const gatewayPorts = await gatewayPortsOf(options, replicas);
  const runtime = options.runtime ?? 'source';
  if (options.processes === 'single' && runtime !== 'source') {
    throw new Error('one process for every service runs from source only');
  }
  const names: readonly ProcessName[] =
    options.processes === 'single' ? [SINGLE_PROCESS] : SERVICE_NAMES;
  const supervised = await Promise.all(
    names.flatMap((name) =>
      gatewayPorts.map(async (ports, index) => {
        const opsPort = await freePort();
        return new SupervisedService(
          name,
          index + 1,
          opsPort,
          { ...shared, ...ownEnvOf(name), ...ports, OPS_PORT: String(opsPort) },
          entryOf(name, runtime),
          options.onLine,
          () => stopping,
        );
      }),
    ),
  );
  for (const service of supervised) service.start();
  const proxies =
    replicas === 1
      ? []
      : await Promise.all([
          startRoundRobinProxy(
            options.publicPort,
            gatewayPorts.map((ports) => Number(ports.PORT)),
          ),
          startRoundRobinProxy(
            options.adminPort,
            gatewayPorts.map((ports) => Number(ports.ADMIN_PORT)),
          ),
        ]);

  return {
    services: supervised,
    publicUrl: `http://127.0.0.1:${options.publicPort}`,
    adminUrl: `http://127.0.0.1:${options.adminPort}`,
    async waitUntilReady(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      const pending = new Set(supervised);
      while (pending.size > 0) {
        for (const service of [...pending]) {
          if (await httpOk(`http://127.0.0.1:${service.opsPort}/readyz`)) pending.delete(service);
        }
        if (pending.size === 0) return;
        if (Date.now() > deadline) {
          throw new Error(
            `not ready after ${timeoutMs} ms: ${[...pending].map((s) => s.name).join(', ')}`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    },
    async stop() {
      stopping = true;
      // The gateway first so no new work arrives, then everything else together.
      const gateway = supervised.filter((service) => service.name === 'gateway');
      await Promise.all(gateway.map((service) => service.stop()));
      await Promise.all(proxies.map((proxy) => proxy.stop()));
      await Promise.all(supervised.map((service) => service.stop()));
    },
  };
}

/**
 * The public and admin ports of each gateway replica (and the same pair for every process of the
 * other services, which do not listen on them): the stack's own ports for a single replica, free
 * ones behind the proxy for several.
 */
async function gatewayPortsOf(
  options: ServicesOptions,
  replicas: number,
): Promise<Array<{ PORT: string; ADMIN_PORT: string }>> {
  if (replicas === 1) {
    return [{ PORT: String(options.publicPort), ADMIN_PORT: String(options.adminPort) }];
  }
  return Promise.all(
    Array.from({ length: replicas }, async () => ({
      PORT: String(await freePort()),
      ADMIN_PORT: String(await freePort()),
    })),
  );
}

/** The Node arguments that run a process of the stack. */
function entryOf(name: ProcessName, runtime: 'source' | 'bundle'): string[] {
  if (name === SINGLE_PROCESS) return ['--import', 'tsx', 'scripts/stack/single-process.ts'];
  return runtime === 'bundle'
    ? ['--enable-source-maps', join('dist', name, 'main.mjs')]
    : ['--import', 'tsx', join('services', name, 'src/main.ts')];
}

/** A process's own variables: the one process of every service gets every worker's. */
function ownEnvOf(name: ProcessName): Record<string, string> {
  const owners = name === SINGLE_PROCESS ? SERVICE_NAMES : [name];
  return Object.assign({}, ...owners.map((owner) => SERVICE_OWN_ENV[owner]?.() ?? {}));
}

/** What a worker finds in its container image, provided here. */
const SERVICE_OWN_ENV: Partial<Record<ServiceName, () => Record<string, string>>> = {
  'worker-image': imageWorkerAllocatorEnv,
  'worker-audio': audioWorkerToolEnv,
};

/** The pinned static ffmpeg and ffprobe (scripts/infra/tools.json, `wheels`), not the machine's. */
export function audioWorkerToolEnv(): { FFMPEG_PATH: string; FFPROBE_PATH: string } {
  return { FFMPEG_PATH: toolPath('ffmpeg'), FFPROBE_PATH: toolPath('ffprobe') };
}

/**
 * libvips on glibc's allocator fragments memory over long runs; the image worker preloads
 * jemalloc (provisioned as libjemalloc2) as its container image does.
 */
export function imageWorkerAllocatorEnv(): Record<string, string> {
  const recommended = recommendedImageWorkerEnv();
  return existsSync(recommended.LD_PRELOAD)
    ? { ...recommended }
    : { MALLOC_ARENA_MAX: recommended.MALLOC_ARENA_MAX };
}

class SupervisedService implements RunningService {
  restarts = 0;
  private child: ChildProcess | undefined;
  private restartTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly name: ProcessName,
    readonly replica: number,
    readonly opsPort: number,
    private readonly env: Record<string, string | undefined>,
    private readonly entry: string[],
    private readonly onLine: ServicesOptions['onLine'],
    private readonly stopping: () => boolean,
  ) {}

  pid(): number | undefined {
    return this.child?.pid;
  }

  start(): void {
    const startedAt = Date.now();
    const child = spawnOwned(process.execPath, this.entry, { cwd: PROJECT_ROOT, env: this.env });
    this.child = child;
    for (const stream of [child.stdout, child.stderr]) {
      if (stream === null) continue;
      createInterface({ input: stream }).on('line', (line) => this.onLine?.(this.name, line));
    }
    child.on('exit', (code, signal) => {
      if (this.stopping()) return;
      // A service that ran for a minute is healthy again: start counting from zero.
      if (Date.now() - startedAt > 60_000) this.restarts = 0;
      const delay = Math.min(1_000 * 2 ** this.restarts, 15_000);
      this.restarts += 1;
      this.onLine?.(this.name, `exited (${signal ?? `code ${code}`}); restarting in ${delay} ms`);
      this.restartTimer = setTimeout(() => this.start(), delay);
    });
  }

  async stop(): Promise<void> {
    clearTimeout(this.restartTimer);
    if (this.child !== undefined) await stopProcess(this.child, 12_000);
  }
}
