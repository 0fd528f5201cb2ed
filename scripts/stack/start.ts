import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { launchInfrastructure, type RunningInfrastructure } from '../infra/launcher';
import { PROJECT_ROOT, provisionTools } from '../infra/provision';
import { formatLogLine, prefixFor } from './log-format';
import { type RunningServices, SERVICE_NAMES, startServices } from './services';

/**
 * `npm start`: tools, infrastructure and every service as its own process, on this machine.
 * Prints one `ready` line when all are healthy; Ctrl-C or SIGTERM stops everything it started.
 */
const dataDir = resolve(PROJECT_ROOT, process.env.TAMP_DATA_DIR ?? '.data');
const publicPort = Number(process.env.PORT ?? 8080);
const adminPort = Number(process.env.ADMIN_PORT ?? 8081);
const width = Math.max(...SERVICE_NAMES.map((name) => name.length), 'tamp'.length);
const say = (message: string) => process.stdout.write(`${prefixFor('tamp', width)} ${message}\n`);

let infrastructure: RunningInfrastructure | undefined;
let services: RunningServices | undefined;
let stopping: Promise<void> | undefined;

async function stop(exitCode: number): Promise<void> {
  stopping ??= (async () => {
    say('stopping…');
    await services?.stop();
    await infrastructure?.stop();
    await rm(join(dataDir, 'stack.json'), { force: true });
    say('stopped');
  })();
  await stopping;
  process.exit(exitCode);
}
process.on('SIGINT', () => void stop(0));
process.on('SIGTERM', () => void stop(0));

try {
  await provisionTools('stack', (message) => say(message));
  await mkdir(dataDir, { recursive: true });
  infrastructure = await launchInfrastructure({ dataDir });
  say(
    `infrastructure up: ${infrastructure.natsUrl} ${infrastructure.mongoUrl} ${infrastructure.s3.endpoint}`,
  );
  const adminToken = await localAdminToken();
  services = await startServices({
    infrastructure,
    publicPort,
    adminPort,
    env: { ADMIN_TOKEN: adminToken },
    onLine: (name, line) =>
      process.stdout.write(`${prefixFor(name, width)} ${formatLogLine(line)}\n`),
  });
  await services.waitUntilReady(180_000);
  await writeFile(
    join(dataDir, 'stack.json'),
    JSON.stringify(
      {
        publicUrl: services.publicUrl,
        adminUrl: services.adminUrl,
        launcherPid: process.pid,
        infrastructure: { ...infrastructure, stop: undefined },
        services: services.services.map((service) => ({
          name: service.name,
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
} catch (error) {
  say(`failed to start: ${error instanceof Error ? error.message : String(error)}`);
  await stop(1);
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
