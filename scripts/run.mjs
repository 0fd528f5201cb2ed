// Entry point of `npm start`, `npm test`, `npm run test:unit`, `npm run tools`, `npm run admin`, `npm run images` and
// `npm run cluster`.
// Plain JavaScript on purpose: it runs on a fresh clone before any dependency is installed.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const [command = 'start', ...rest] = process.argv.slice(2);

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 20 || (major === 20 && minor < 19)) {
  console.error(`Tamp needs Node.js >= 20.19 (found ${process.versions.node}).`);
  process.exit(1);
}

ensureDependencies();

const tsEntry = {
  start: ['scripts/stack/start.ts'],
  tools: ['scripts/infra/provision-cli.ts'],
  admin: ['scripts/admin/cli.ts'],
  cluster: ['scripts/cluster/start.ts'],
  images: ['scripts/infra/images/cli.ts'],
};

if (command === 'test') {
  // Type check and lint first: they are fast and their failures are the easiest to read.
  run(process.execPath, [bin('typescript', 'bin/tsc'), '--noEmit', '-p', 'tsconfig.json']);
  run(process.execPath, [bin('@biomejs/biome', 'bin/biome'), 'check', '.']);
  forward(process.execPath, [bin('vitest', 'vitest.mjs'), 'run', ...rest]);
} else if (command === 'test:unit') {
  // The unit project alone: no server is built or started, so it runs in seconds.
  forward(process.execPath, [bin('vitest', 'vitest.mjs'), 'run', '--project', 'unit', ...rest]);
} else if (command in tsEntry) {
  forward(process.execPath, ['--import', 'tsx', ...tsEntry[command], ...rest]);
} else {
  console.error(
    `unknown command ${command}; use start, test, test:unit, tools, admin, images or cluster`,
  );
  process.exit(2);
}

/** Installs node modules when missing or older than the lockfile (a fresh clone, a pull). */
function ensureDependencies() {
  const marker = join(root, 'node_modules', '.package-lock.json');
  const lock = join(root, 'package-lock.json');
  if (existsSync(marker) && statSync(marker).mtimeMs >= statSync(lock).mtimeMs) return;
  console.error('Installing node modules (npm ci)…');
  const result = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

function bin(pkg, path) {
  return join(root, 'node_modules', pkg, path);
}

function run(file, args) {
  const result = spawnSync(file, args, { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

/**
 * Runs the real program as a child, forwarding signals so Ctrl-C and SIGTERM reach it once. On
 * Linux the child also gets SIGTERM if this process dies without forwarding anything (killed
 * outright): util-linux's setpriv sets its parent-death signal, so nothing outlives `npm start`.
 */
function forward(file, args) {
  const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path));
  const [command, commandArgs] =
    setpriv === undefined
      ? [file, args]
      : [setpriv, ['--pdeathsig', 'SIGTERM', '--', file, ...args]];
  const child = spawn(command, commandArgs, { cwd: root, stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => child.kill(signal));
  }
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}
