import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { configureSharp, recommendedImageWorkerEnv } from './sharp-runtime';

// vitest's forks pool gives this file its own process, but leave sharp as it was anyway.
const initialCache = sharp.cache();
const initialConcurrency = sharp.concurrency();
afterAll(() => {
  sharp.cache({
    memory: initialCache.memory.max,
    files: initialCache.files.max,
    items: initialCache.items.max,
  });
  sharp.concurrency(initialConcurrency);
});

describe('configureSharp', () => {
  it('bounds the libvips cache and thread pool', () => {
    const state = configureSharp({ cacheMemoryMb: 16, concurrency: 2 });
    const cache = sharp.cache();
    expect(cache.memory.max).toBe(16);
    expect(cache.files.max).toBe(0);
    expect(sharp.concurrency()).toBe(2);
    expect(state).toMatchObject({ cacheMemoryMb: 16, concurrency: 2 });
    expect(typeof state.jemalloc).toBe('boolean');
  });

  it('turns the cache off with 0 MB and uses every core with concurrency 0', () => {
    const state = configureSharp({ cacheMemoryMb: 0, concurrency: 0 });
    expect(sharp.cache().memory.max).toBe(0);
    expect(sharp.cache().items.max).toBe(0);
    expect(state.cacheMemoryMb).toBe(0);
    expect(state.concurrency).toBe(availableParallelism());
  });

  it('rejects negative or fractional settings', () => {
    expect(() => configureSharp({ cacheMemoryMb: -1, concurrency: 1 })).toThrow(RangeError);
    expect(() => configureSharp({ cacheMemoryMb: 10, concurrency: 1.5 })).toThrow(/concurrency/);
  });
});

describe('recommendedImageWorkerEnv', () => {
  it('preloads jemalloc from the architecture folder and caps glibc arenas as the fallback', () => {
    expect(recommendedImageWorkerEnv('x64')).toEqual({
      LD_PRELOAD: '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2',
      MALLOC_CONF: 'dirty_decay_ms:0,muzzy_decay_ms:0',
      MALLOC_ARENA_MAX: '2',
    });
    expect(recommendedImageWorkerEnv('arm64').LD_PRELOAD).toBe(
      '/usr/lib/aarch64-linux-gnu/libjemalloc.so.2',
    );
  });
});

describe('jemalloc detection', () => {
  const run = promisify(execFile);
  const runtimeModule = fileURLToPath(new URL('./sharp-runtime.ts', import.meta.url));
  const script = `import(${JSON.stringify(runtimeModule)}).then((m) => console.log(m.configureSharp({ cacheMemoryMb: 0, concurrency: 1 }).jemalloc))`;

  async function jemallocIn(env: NodeJS.ProcessEnv): Promise<string> {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '-e', script], {
      env: { PATH: process.env.PATH, ...env },
    });
    return stdout.trim();
  }

  it('reports glibc when nothing is preloaded', async () => {
    expect(await jemallocIn({})).toBe('false');
  });

  const preload = recommendedImageWorkerEnv().LD_PRELOAD;
  // npm test provisions libjemalloc2 on Debian, so this runs here and in CI; it is skipped only
  // where the library cannot exist (another distribution or architecture layout).
  it.skipIf(!existsSync(preload))(
    'reports jemalloc when the recommended env preloads it',
    async () => {
      expect(await jemallocIn({ ...recommendedImageWorkerEnv() })).toBe('true');
    },
  );
});
