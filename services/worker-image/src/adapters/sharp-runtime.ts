import { readFileSync } from 'node:fs';
import sharp from 'sharp';

export interface SharpRuntimeOptions {
  /** Upper bound of libvips' operation cache in MB; 0 turns the cache off. */
  cacheMemoryMb: number;
  /** libvips worker threads per image; 0 means one per CPU core. */
  concurrency: number;
}

export interface SharpRuntimeState {
  cacheMemoryMb: number;
  concurrency: number;
  /** Whether the process runs on jemalloc (see recommendedImageWorkerEnv). */
  jemalloc: boolean;
}

export interface ImageWorkerEnv {
  LD_PRELOAD: string;
  MALLOC_CONF: string;
  MALLOC_ARENA_MAX: string;
}

/**
 * Environment the image worker's process should be started with. The container image and the
 * Helm chart set it; this code cannot change how node is launched, it only documents it.
 *
 * libvips allocates and frees many large, short-lived buffers from several threads. glibc's
 * malloc gives threads their own arenas (up to 8 per core) and rarely returns freed memory
 * from them, so a worker's RSS climbs far above what it uses (fragmentation) until the pod is
 * OOM-killed. jemalloc (Debian package libjemalloc2, preloaded) returns memory reliably, and
 * sharp notices it and keeps its full thread pool; on plain glibc sharp itself drops to one
 * thread. MALLOC_ARENA_MAX=2 is the fallback for an image without jemalloc: glibc stays, with
 * two arenas, which bounds the fragmentation at a small cost in allocator contention. Setting
 * both is harmless: jemalloc ignores MALLOC_ARENA_MAX, and a missing preload library only makes
 * the dynamic loader print a warning and carry on with glibc.
 *
 * MALLOC_CONF makes jemalloc hand freed pages back to the OS at once instead of keeping them
 * for 10 s: the worker's memory is budgeted per job (memory-model.ts), so RSS should follow
 * what the jobs hold. Measured on a 48 MP full-size WebP: peak 337 instead of 369 MiB, idle
 * 87 instead of 101 MiB, with no measurable change in processing time (libvips frees large
 * buffers, so the extra madvise calls are few).
 *
 * Debian's multiarch folder that holds the library differs by CPU architecture.
 */
export function recommendedImageWorkerEnv(arch: string = process.arch): ImageWorkerEnv {
  const triplet = arch === 'arm64' ? 'aarch64-linux-gnu' : 'x86_64-linux-gnu';
  return {
    LD_PRELOAD: `/usr/lib/${triplet}/libjemalloc.so.2`,
    MALLOC_CONF: 'dirty_decay_ms:0,muzzy_decay_ms:0',
    MALLOC_ARENA_MAX: '2',
  };
}

function assertNonNegativeInteger(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
  }
}

/**
 * Bounds libvips' process-wide resources for a worker that handles one image after another.
 * Call once at start-up, before the first image.
 *
 * - The operation cache helps programs that re-run the same operations on the same images; a
 *   worker never sees an image twice, so the cache only holds memory (and, through open
 *   files, the disk space of deleted temp files). It is keyed by file name, so a reused path
 *   could even be served a stale image. Keep it small; 0 turns it off. Open files are never
 *   cached.
 * - Concurrency is libvips' threads per image. Pair it with the pod's CPU limit and the number
 *   of images processed at once; AVIF's encoder (libaom) adds its own threads regardless.
 */
export function configureSharp(options: SharpRuntimeOptions): SharpRuntimeState {
  assertNonNegativeInteger('cacheMemoryMb', options.cacheMemoryMb);
  assertNonNegativeInteger('concurrency', options.concurrency);
  if (options.cacheMemoryMb === 0) {
    sharp.cache(false);
  } else {
    sharp.cache({ memory: options.cacheMemoryMb, files: 0, items: 100 });
  }
  const concurrency = sharp.concurrency(options.concurrency);
  return {
    cacheMemoryMb: sharp.cache().memory.max,
    concurrency,
    jemalloc: isUsingJemalloc(),
  };
}

/**
 * Whether jemalloc is mapped into this process (Linux). sharp makes the same check when it
 * loads, but exposes it only on its private native binding, so read the process's own memory
 * map instead.
 */
export function isUsingJemalloc(): boolean {
  try {
    return readFileSync('/proc/self/maps', 'utf8').includes('libjemalloc');
  } catch {
    return false; // no /proc: not Linux, so not the container this is tuned for
  }
}
