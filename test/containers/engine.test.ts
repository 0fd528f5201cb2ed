import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type ContainerEngine,
  processesMentioning,
  startContainerEngine,
} from '@tamp/scripts/infra/container-engine';
import { IMAGE_STORAGE } from '@tamp/scripts/infra/images/build-images';
import { mountsUnder } from '@tamp/scripts/infra/kubernetes/cluster';
import { isAlive, pollUntil } from '@tamp/scripts/infra/kubernetes/processes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The engine itself (scripts/infra/container-engine.ts), on a data folder of its own beside the
 * one the project's setup started: podman serving the Docker API on a socket, running an image
 * built here from the storage buildah shares, and leaving nothing behind when stopped or after
 * a crash. Containers are created through the Docker API as testcontainers creates them.
 */

/** The image the setup built for NATS (test/setup/container-engine.ts names it). */
const IMAGE = process.env.TAMP_NATS_IMAGE ?? '';

let dataDir: string;

beforeAll(async () => {
  expect(IMAGE).toMatch(/^tamp\.local\/nats:/);
  dataDir = await mkdtemp(join(tmpdir(), 'tamp-engine-test-'));
});

afterAll(async () => {
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
});

/** POST/GET/DELETE on the engine's Docker API, JSON in and out. */
async function docker<T>(
  engine: ContainerEngine,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; data: T }> {
  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    const call = request(
      {
        socketPath: engine.socketPath,
        method,
        path,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      },
      (response) => {
        let text = '';
        response.on('data', (chunk) => {
          text += chunk;
        });
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            data: text === '' ? ({} as T) : JSON.parse(text),
          }),
        );
      },
    );
    call.on('error', reject);
    call.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** A NATS server on a free loopback port in the host's network, as @tamp/testcontainers runs it. */
async function runNats(engine: ContainerEngine, port: number): Promise<string> {
  const created = await docker<{ Id: string }>(engine, 'POST', '/containers/create', {
    Image: IMAGE,
    Entrypoint: ['nats-server'],
    Cmd: [
      '--jetstream',
      '--store_dir',
      '/data',
      '--addr',
      '127.0.0.1',
      '--http_port',
      String(port),
      '--port',
      '-1',
    ],
    HostConfig: { NetworkMode: 'host', Tmpfs: { '/data': 'rw,mode=1777' } },
  });
  expect(created.status, JSON.stringify(created.data)).toBe(201);
  const started = await docker(engine, 'POST', `/containers/${created.data.Id}/start`);
  expect(started.status).toBe(204);
  return created.data.Id;
}

/** The containers the shared storage holds (read from its file: a podman call would mount it). */
async function storageContainers(): Promise<string[]> {
  const file = join(IMAGE_STORAGE.root, 'overlay-containers', 'containers.json');
  const listed = JSON.parse(await readFile(file, 'utf8')) as Array<{ id: string }>;
  return listed.map((container) => container.id);
}

async function containerPid(engine: ContainerEngine, id: string): Promise<number> {
  const inspected = await docker<{ State: { Pid: number; Running: boolean } }>(
    engine,
    'GET',
    `/containers/${id}/json`,
  );
  expect(inspected.data.State.Running).toBe(true);
  return inspected.data.State.Pid;
}

describe('the container engine (podman serving the Docker API)', () => {
  it('runs an image built here, with the lowered limits, and stops leaving no process, container or mount', async () => {
    const engine = await startContainerEngine({ dataDir });
    let stopped = false;
    try {
      expect(engine.env).toMatchObject({
        DOCKER_HOST: `unix://${join(dataDir, 'podman.sock')}`,
        TESTCONTAINERS_RYUK_DISABLED: 'true',
      });
      const port = 20_000 + Math.floor(Math.random() * 5_000);
      const id = await runNats(engine, port);
      const pid = await containerPid(engine, id);
      await pollUntil(
        'NATS in the container to answer on loopback',
        async () => ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok ? true : undefined),
        30_000,
      );
      // The engine's default limits, which runc can set here (the host's cannot be).
      const limits = await readFile(`/proc/${pid}/limits`, 'utf8');
      expect(limits).toMatch(/Max open files\s+1024\s+1024/);
      expect(limits).toMatch(/Max processes\s+4096\s+4096/);
      const merged = (
        await engine.podman(['inspect', id, '--format', '{{.GraphDriver.Data.MergedDir}}'])
      ).trim();
      expect((await readFile('/proc/self/mountinfo', 'utf8')).includes(` ${merged} `)).toBe(true);

      await engine.stop();
      stopped = true;
      expect(isAlive(pid)).toBe(false);
      expect(await processesMentioning(dataDir)).toEqual([]);
      expect(await mountsUnder(dataDir)).toEqual([]);
      expect((await readFile('/proc/self/mountinfo', 'utf8')).includes(` ${merged} `)).toBe(false);
      // Removed from the shared storage too, not only from the engine's own list.
      expect(await storageContainers()).not.toContain(id);
    } finally {
      if (!stopped) await engine.stop();
    }
  }, 180_000);

  it('removes what a crashed run left on the same data folder when it starts again', async () => {
    const crashed = await startContainerEngine({ dataDir });
    const port = 20_000 + Math.floor(Math.random() * 5_000);
    const id = await runNats(crashed, port);
    const pid = await containerPid(crashed, id);
    // The service dies without stopping anything; its container keeps running under conmon.
    const servicePid = Number(await readFile(join(dataDir, 'podman.pid'), 'utf8'));
    process.kill(servicePid, 'SIGKILL');
    await pollUntil(
      'the service to be gone',
      async () => (isAlive(servicePid) ? undefined : true),
      10_000,
    );
    expect(isAlive(pid)).toBe(true);

    const again = await startContainerEngine({ dataDir });
    try {
      expect(isAlive(pid)).toBe(false);
      expect(await again.podman(['ps', '--all', '--quiet'])).toBe('');
      expect(await storageContainers()).not.toContain(id);
    } finally {
      await again.stop();
    }
    expect(await processesMentioning(dataDir)).toEqual([]);
  }, 180_000);
});
