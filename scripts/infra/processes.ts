import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';

/**
 * Child processes the launchers own: servers and services, each in its own process group (a
 * terminal's Ctrl-C reaches only the launcher, which stops them in order) and each bound to the
 * launcher's life by a parent-death signal, so a launcher that is killed outright (SIGKILL,
 * OOM) takes them with it instead of leaving orphans that hold ports and data folders.
 */

export interface OwnedProcessOptions {
  env: NodeJS.ProcessEnv;
  cwd?: string;
  /** Run as this user (a root launcher starts PostgreSQL, which refuses root, as `postgres`). */
  user?: string;
  /**
   * What the program gets when its launcher dies (SIGTERM by default): the signal that stops it
   * promptly, e.g. SIGINT for PostgreSQL, whose SIGTERM waits for every client to leave.
   */
  deathSignal?: NodeJS.Signals;
}

/**
 * util-linux's setpriv sets PR_SET_PDEATHSIG (and switches user) and then execs the program, so
 * the program itself is the launcher's child and gets SIGTERM when the launcher dies. Node has
 * no prctl of its own. Without setpriv (not Linux) the child is spawned directly.
 */
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path));

export function spawnOwned(
  file: string,
  args: string[],
  options: OwnedProcessOptions,
): ChildProcess {
  const user = options.user === undefined ? [] : userArgs(options.user);
  const [command, commandArgs] =
    SETPRIV === undefined
      ? [file, args]
      : [SETPRIV, [...user, '--pdeathsig', options.deathSignal ?? 'SIGTERM', '--', file, ...args]];
  const child = spawn(command, commandArgs, {
    env: options.env,
    cwd: options.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  killOnExit(child);
  return child;
}

/**
 * Switches to `user`, keeping only the capability to look up paths (CAP_DAC_READ_SEARCH): a data
 * folder inside root's private folders (a checkout in /root, a 0700 temp folder) stays reachable
 * without loosening any folder's permissions.
 */
function userArgs(user: string): string[] {
  return [
    '--reuid',
    user,
    '--regid',
    user,
    '--init-groups',
    '--inh-caps',
    '+dac_read_search',
    '--ambient-caps',
    '+dac_read_search',
  ];
}

const children = new Set<ChildProcess>();

/** A launcher exiting normally (even on an uncaught error) kills whatever it still owns. */
function killOnExit(child: ChildProcess): void {
  if (children.size === 0) {
    process.once('exit', () => {
      for (const running of children) running.kill('SIGKILL');
    });
  }
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/** `signal` (SIGTERM by default), then SIGKILL if the process has not exited in time. */
export async function stopProcess(
  child: ChildProcess,
  graceMs = 10_000,
  signal: NodeJS.Signals = 'SIGTERM',
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // A paused process (a fault test) must run again to handle the signal.
  child.kill('SIGCONT');
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Whether `pid` is a live process whose command line contains `expected`. */
export async function isRunning(pid: number, expected: string): Promise<boolean> {
  try {
    const commandLine = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    return commandLine.includes(expected);
  } catch {
    return false;
  }
}

/** Kills processes a killed launcher left behind, checking each is still what it was. */
export async function killLeftovers(
  leftovers: readonly { pid: number; expected: string }[],
): Promise<number> {
  let killed = 0;
  for (const { pid, expected } of leftovers) {
    if (!(await isRunning(pid, expected))) continue;
    process.kill(pid, 'SIGCONT');
    process.kill(pid, 'SIGTERM');
    for (let waited = 0; waited < 50 && (await isRunning(pid, expected)); waited++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    if (await isRunning(pid, expected)) process.kill(pid, 'SIGKILL');
    killed++;
  }
  return killed;
}

/**
 * A loopback port nothing listens on, for a server started next. Chosen at random below the
 * kernel's ephemeral range: a port from that range (what binding port 0 returns) can meanwhile
 * become the local end of any outgoing connection or a TIME_WAIT entry, and the server's listen
 * then fails with EADDRINUSE, which a busy test run did. A port is never handed out twice by one
 * process.
 */
export async function freePort(): Promise<number> {
  const [low, high] = portsBelowEphemeralRange();
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (handedOut.has(port) || !(await canListen(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free loopback port between ${low} and ${high}`);
}

const handedOut = new Set<number>();

/** From 10000 up to the ephemeral range or to Kubernetes' NodePort range (30000), the lower. */
function portsBelowEphemeralRange(): [number, number] {
  let ephemeralStart = 32_768;
  try {
    const range = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8');
    ephemeralStart = Number(range.trim().split(/\s+/)[0]);
  } catch {
    // Not Linux: assume the usual range.
  }
  return [10_000, Math.max(12_000, Math.min(ephemeralStart, 30_000))];
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export async function httpOk(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    await response.body?.cancel();
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

/** The uid a root launcher runs PostgreSQL as, or undefined when not root or no such user. */
export function postgresUser(): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  return spawnSync('id', ['-u', 'postgres']).status === 0 ? 'postgres' : undefined;
}

/** A process started by `launch`, with the log file its output goes to. */
export interface LaunchedServer {
  name: string;
  child: ChildProcess;
  logFile: string;
}

const START_TIMEOUT_MS = 60_000;

/**
 * Starts a server as an owned process (see spawnOwned) with its output appended to
 * `<logDir>/<name>.log`, and records it in `servers` so its launcher can stop them in order.
 */
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
  const child = spawnOwned(file, args, {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...extraEnv },
  });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const server = { name, child, logFile };
  servers.push(server);
  return server;
}

/** Polls `probe` every 100 ms until it is true; fails early if the server exits meanwhile. */
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

/**
 * The life of a foreground command (`npm start`, `npm run cluster`): `start`, then run until
 * Ctrl-C or SIGTERM. `stop` runs once, whether a signal asked for it or `start` failed (with
 * whatever `start` got to), and the process exits: 0 on a signal, 1 when `start` failed.
 */
export async function runInForeground(options: {
  say: (message: string) => void;
  start: () => Promise<void>;
  stop: () => Promise<void>;
}): Promise<void> {
  let stopping: Promise<void> | undefined;
  const stop = async (exitCode: number) => {
    stopping ??= (async () => {
      options.say('stopping…');
      await options.stop();
    })();
    await stopping;
    process.exit(exitCode);
  };
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));
  try {
    await options.start();
  } catch (error) {
    options.say(`failed to start: ${error instanceof Error ? error.message : String(error)}`);
    await stop(1);
  }
}
