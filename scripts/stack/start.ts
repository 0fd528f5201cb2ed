import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { launchInfrastructure, type RunningInfrastructure } from '../infra/launcher';
import { isRunning, killLeftovers, runInForeground } from '../infra/processes';
import { PROJECT_ROOT, provisionTools } from '../infra/provision';
import { prefixFor, readLogLine } from './log-format';
import {
  processModelOf,
  type RunningServices,
  SERVICE_NAMES,
  SINGLE_PROCESS,
  startServices,
} from './services';

/**
 * `npm start`: tools, infrastructure and every service as its own process (or all of them in
 * one, TAMP_PROCESSES=single), on this machine.
 * Prints one `ready` line when all are healthy; Ctrl-C or SIGTERM stops everything it started.
 */
const dataDir = resolve(PROJECT_ROOT, process.env.TAMP_DATA_DIR ?? '.data');
const publicPort = Number(process.env.PORT ?? 8080);
const adminPort = Number(process.env.ADMIN_PORT ?? 8081);
/** Processes per service, the gateway's behind a round-robin proxy (docs/load-and-faults.md). */
const replicas = Number(process.env.TAMP_REPLICAS ?? 1);
/** `single`: every service in one process, their calls in memory (docs/service-layout.md). */
const processes = processModelOf(process.env.TAMP_PROCESSES);
/** NATS servers: one, or a JetStream cluster of this many on loopback. */
const natsNodes = Number(process.env.TAMP_NATS_NODES ?? 1);
const width = Math.max(...SERVICE_NAMES.map((name) => name.length), SINGLE_PROCESS.length);
const say = (message: string) => process.stdout.write(`${prefixFor('tamp', width)} ${message}\n`);

let infrastructure: RunningInfrastructure | undefined;
let services: RunningServices | undefined;

await runInForeground({
  say,
  async start() {
    await provisionTools('stack', (message) => say(message));
    await mkdir(dataDir, { recursive: true });
    await stopLeftovers();
    infrastructure = await launchInfrastructure({ dataDir, natsNodes });
    say(
      `infrastructure up: ${infrastructure.natsUrl} ${infrastructure.mongoUrl} ${infrastructure.s3.endpoint}`,
    );
    const adminToken = await localAdminToken();
    services = await startServices({
      infrastructure,
      publicPort,
      adminPort,
      replicas,
      processes,
      env: {
        ADMIN_TOKEN: adminToken,
        // A local stop stays within 15 s: workers hand back what they cannot finish in 5 s.
        SHUTDOWN_TIMEOUT_MS: process.env.SHUTDOWN_TIMEOUT_MS ?? '10000',
        WORKER_STOP_GRACE_MS: process.env.WORKER_STOP_GRACE_MS ?? '5000',
      },
      onLine: (name, line) => {
        const { text, service } = readLogLine(line);
        const source = name === SINGLE_PROCESS ? (service ?? name) : name;
        process.stdout.write(`${prefixFor(source, width)} ${text}\n`);
      },
    });
    await services.waitUntilReady(180_000);
    await writeFile(
      join(dataDir, 'stack.json'),
      JSON.stringify(
        {
          publicUrl: services.publicUrl,
          adminUrl: services.adminUrl,
          launcherPid: process.pid,
          natsUrl: infrastructure.natsUrl,
          mongoUrl: infrastructure.mongoUrl,
          s3: infrastructure.s3,
          servers: Object.values(infrastructure.servers).map((server) => ({
            name: server.name,
            pid: server.pid(),
            file: server.file,
          })),
          services: services.services.map((service) => ({
            name: service.name,
            replica: service.replica,
            pid: service.pid(),
            opsPort: service.opsPort,
          })),
        },
        null,
        2,
      ),
    );
    say(
      `ready: Tamp is listening on ${services.publicUrl} (admin API ${services.adminUrl}); Ctrl-C stops it`,
    );
  },
  async stop() {
    await services?.stop();
    await infrastructure?.stop();
    await rm(join(dataDir, 'stack.json'), { force: true });
    say('stopped');
  },
});

/**
 * A launcher killed outright normally takes its children with it (parent-death signal), but a
 * stack.json left by a launcher that is gone may still name live processes (one started by an
 * older version, say): stop them before their ports and data folders are needed again.
 */
async function stopLeftovers(): Promise<void> {
  const file = join(dataDir, 'stack.json');
  if (!existsSync(file)) return;
  const previous = JSON.parse(await readFile(file, 'utf8')) as {
    launcherPid?: number;
    servers?: { pid?: number; file: string }[];
    services?: { pid?: number; name: string }[];
  };
  if (previous.launcherPid !== undefined && (await isRunning(previous.launcherPid, 'start.ts'))) {
    throw new Error(`another npm start (pid ${previous.launcherPid}) is using ${dataDir}`);
  }
  const leftovers = [
    ...(previous.services ?? []).map((service) => ({
      pid: service.pid,
      expected: `${service.name}/`,
    })),
    ...(previous.servers ?? []).map((server) => ({ pid: server.pid, expected: server.file })),
  ].filter((entry): entry is { pid: number; expected: string } => entry.pid !== undefined);
  const killed = await killLeftovers(leftovers);
  if (killed > 0) say(`stopped ${killed} processes left by an earlier run`);
  await rm(file, { force: true });
}

/** The admin token of the local stack, made once and kept with its data so the CLI finds it. */
async function localAdminToken(): Promise<string> {
  if (process.env.ADMIN_TOKEN !== undefined) return process.env.ADMIN_TOKEN;
  const file = join(dataDir, 'admin-token');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const token = randomBytes(24).toString('base64url');
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  return token;
}
