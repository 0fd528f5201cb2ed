import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/infra/launcher';
import { PROJECT_ROOT } from '../../scripts/infra/provision';

interface StackFile {
  publicUrl: string;
  adminUrl: string;
  launcherPid: number;
  servers: Array<{ name: string; pid: number; file: string }>;
  services: Array<{ name: string; pid: number; opsPort: number }>;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Processes whose command line mentions the stack's private data folder (the launched servers). */
function processesUsing(path: string): string[] {
  const output = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return output.split('\n').filter((line) => line.includes(path) && !line.includes('ps -eo'));
}

describe('npm start (the whole local stack)', () => {
  let dataDir: string;
  let stack: ChildProcess | undefined;

  afterAll(async () => {
    if (stack?.exitCode === null) stack.kill('SIGKILL');
    if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
  });

  it('starts every service against fresh servers, answers, and stops leaving no process', async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'tamp-stack-'));
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
    const child = spawn(process.execPath, ['scripts/run.mjs', 'start'], {
      cwd: PROJECT_ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    stack = child;
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

    const stackFile = JSON.parse(await readFile(join(dataDir, 'stack.json'), 'utf8')) as StackFile;
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

    const pids = [
      stackFile.launcherPid,
      ...stackFile.servers.map((server) => server.pid),
      ...stackFile.services.map((service) => service.pid),
    ];
    expect(pids.filter(isRunning)).toEqual([]);
    expect(processesUsing(dataDir)).toEqual([]);
  }, 240_000);
});
