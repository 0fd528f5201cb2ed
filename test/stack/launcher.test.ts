import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { uploadBytes } from '@tamp/scripts/bench/bench-stack';
import { generateLongWav } from '@tamp/scripts/fixtures/speech';
import { freePort } from '@tamp/scripts/infra/launcher';
import { PROJECT_ROOT } from '@tamp/scripts/infra/provision';
import { afterAll, describe, expect, it } from 'vitest';

interface StackFile {
  publicUrl: string;
  adminUrl: string;
  launcherPid: number;
  servers: Array<{ name: string; pid: number; file: string }>;
  services: Array<{ name: string; pid: number; opsPort: number }>;
}

/**
 * Whether `pid` is still alive. A zombie is not: it has exited and only waits to be reaped, and
 * the orphans of a killed launcher are reaped by PID 1, which here does so every few seconds.
 */
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** The stack's processes (launcher, servers, services) still running, by name and pid. */
function stillRunning(stackFile: StackFile): string[] {
  const named = [
    { name: 'launcher', pid: stackFile.launcherPid },
    ...stackFile.servers,
    ...stackFile.services,
  ];
  return named.filter(({ pid }) => isRunning(pid)).map(({ name, pid }) => `${name} (${pid})`);
}

/** Processes whose command line mentions the stack's private data folder (the launched servers). */
function processesUsing(path: string): string[] {
  const output = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return output.split('\n').filter((line) => line.includes(path) && !line.includes('ps -eo'));
}

/** Half a minute of speech: long enough to keep ffmpeg busy while the stack is stopped. */
async function longSpeech(dataDir: string): Promise<Buffer> {
  const path = join(dataDir, 'speech.wav');
  await generateLongWav(path, 30, { channels: 1 });
  return readFile(path);
}

/**
 * `npm start` on a data folder; resolves once it printed its ready line. `through: 'npm'` starts
 * it as a user does, so a signal reaches npm first; otherwise the launcher is the child.
 */
async function startStack(
  dataDir: string,
  through: 'npm' | 'launcher' = 'launcher',
): Promise<{ child: ChildProcess; port: number }> {
  const [port, adminPort] = await Promise.all([freePort(), freePort()]);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    ADMIN_PORT: String(adminPort),
    TAMP_DATA_DIR: dataDir,
  };
  // Its own servers, not the test run's: this is the launcher under test.
  delete env.NATS_URL;
  delete env.MONGO_URL;
  delete env.S3_ENDPOINT;
  const [command, args] =
    through === 'npm' ? ['npm', ['start']] : [process.execPath, ['scripts/run.mjs', 'start']];
  const child = spawn(command, args, {
    cwd: PROJECT_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  const output: string[] = [];
  const ready = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      output.push(line);
      if (/\bready\b/.test(line) && line.includes(`http://127.0.0.1:${port}`)) resolve(line);
    });
    createInterface({ input: child.stderr! }).on('line', (line) => output.push(line));
    child.once('exit', (code) =>
      reject(new Error(`stack exited with ${code}:\n${output.slice(-40).join('\n')}`)),
    );
  });
  await ready;
  return { child, port };
}

const running = new Set<ChildProcess>();
const dataDirs: string[] = [];

async function readStackFile(dataDir: string): Promise<StackFile> {
  return JSON.parse(await readFile(join(dataDir, 'stack.json'), 'utf8')) as StackFile;
}

/** Polls (100 ms) until `check` holds, for at most `timeoutMs`; the last value either way. */
async function within<T>(timeoutMs: number, check: () => T): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = check();
  while (!value && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    value = check();
  }
  return value;
}

afterAll(async () => {
  for (const child of running) if (child.exitCode === null) child.kill('SIGKILL');
  for (const dataDir of dataDirs) await rm(dataDir, { recursive: true, force: true });
});

describe('npm start (the whole local stack)', () => {
  it('starts every service against fresh servers, answers, and stops leaving no process', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'tamp-stack-'));
    dataDirs.push(dataDir);
    // Through npm, whose shell would otherwise die of the SIGTERM below and orphan the launcher.
    const { child, port } = await startStack(dataDir, 'npm');

    const stackFile = await readStackFile(dataDir);
    expect(stackFile.services.map((service) => service.name).sort()).toEqual([
      'billing',
      'gateway',
      'job',
      'operator',
      'upload',
      'webhook',
      'worker-audio',
      'worker-image',
      'worker-text',
    ]);
    expect(stackFile.servers.map((server) => server.name).sort()).toEqual([
      'ferretdb',
      'minio',
      'nats',
      'postgres',
    ]);

    for (const service of stackFile.services) {
      for (const path of ['/healthz', '/readyz']) {
        const response = await fetch(`http://127.0.0.1:${service.opsPort}${path}`);
        expect(response.status, `${service.name} ${path}`).toBe(200);
      }
      const metrics = await (await fetch(`http://127.0.0.1:${service.opsPort}/metrics`)).text();
      expect(metrics).toContain(`service="${service.name}"`);
    }

    const notFound = await fetch(`http://127.0.0.1:${port}/nope`);
    expect(notFound.status).toBe(404);
    expect(notFound.headers.get('x-request-id')).toBeTruthy();
    const body = (await notFound.json()) as {
      success: boolean;
      error: { code: string; message: string };
    };
    expect(body.success).toBe(false);
    expect(body.error.code).toBe('NOT_FOUND');

    const exited = new Promise<number | null>((resolve) =>
      child.once('exit', (code) => resolve(code)),
    );
    child.kill('SIGTERM');
    expect(await exited).toBe(0);

    expect(stillRunning(stackFile)).toEqual([]);
    expect(processesUsing(dataDir)).toEqual([]);
  }, 240_000);

  it('stops within 15 s while its workers are busy, leaving no process', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'tamp-stack-'));
    dataDirs.push(dataDir);
    const { child } = await startStack(dataDir);
    const stackFile = await readStackFile(dataDir);
    const adminToken = (await readFile(join(dataDir, 'admin-token'), 'utf8')).trim();
    const client = {
      api: async <Data>(
        method: string,
        path: string,
        init: { body?: unknown; token?: string } = {},
      ) => {
        const base = path.startsWith('/admin') ? stackFile.adminUrl : stackFile.publicUrl;
        const response = await fetch(`${base}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${init.token ?? adminToken}`,
            ...(init.body !== undefined && { 'content-type': 'application/json' }),
          },
          body: init.body === undefined ? undefined : JSON.stringify(init.body),
        });
        return { status: response.status, body: (await response.json()) as { data?: Data } };
      },
    };
    const account = await client.api<{ apiKey: string }>('POST', '/admin/accounts', {
      body: { plan: 'pro' },
    });
    const apiKey = account.body.data!.apiKey;
    const audioId = await uploadBytes(client, apiKey, 'speech.wav', await longSpeech(dataDir));
    for (let index = 0; index < 4; index++) {
      const created = await client.api('POST', '/v1/audio', {
        token: apiKey,
        body: { audioId, preset: 'podcast' },
      });
      expect(created.status).toBe(202);
    }
    const audioWorker = stackFile.services.find((service) => service.name === 'worker-audio')!;
    const ffmpegOfWorker = () =>
      execFileSync('ps', ['-o', 'args=', '--ppid', String(audioWorker.pid)], { encoding: 'utf8' })
        .split('\n')
        .filter((line) => line.includes('ffmpeg'));
    const busy = await within(30_000, () => {
      try {
        return ffmpegOfWorker().length > 0;
      } catch {
        return false; // ps exits 1 when the worker has no children yet
      }
    });
    expect(busy).toBe(true);

    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const stopping = performance.now();
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const stopSeconds = (performance.now() - stopping) / 1000;
    console.log(`graceful stop with worker-audio busy: ${stopSeconds.toFixed(1)} s`);
    expect(stopSeconds).toBeLessThan(15);
    expect(isRunning(audioWorker.pid)).toBe(false);
    expect(stillRunning(stackFile)).toEqual([]);
    expect(processesUsing(dataDir)).toEqual([]);
  }, 300_000);

  it('leaves nothing behind when its launcher is killed outright, and starts again after', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'tamp-stack-'));
    dataDirs.push(dataDir);
    const first = await startStack(dataDir);
    const stackFile = await readStackFile(dataDir);
    // No signal handler runs: only the parent-death signals can stop the servers and services.
    process.kill(stackFile.launcherPid, 'SIGKILL');
    await within(20_000, () => stillRunning(stackFile).length === 0);
    expect(stillRunning(stackFile)).toEqual([]);
    await within(10_000, () => first.child.exitCode !== null);

    const second = await startStack(dataDir);
    const health = await fetch(`http://127.0.0.1:${second.port}/nope`);
    expect(health.status).toBe(404);
    const exited = new Promise((resolve) => second.child.once('exit', resolve));
    second.child.kill('SIGTERM');
    await exited;
    expect(processesUsing(dataDir)).toEqual([]);
  }, 300_000);
});
