import { existsSync } from 'node:fs';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TextOperation } from '@tamp/proto';
import { Piscina } from 'piscina';
import type { TextPipelineResult } from '../domain/pipeline';
import type { TextPipelineTask } from './text-pipeline-thread';

/** Runs the text pipeline off the caller's thread; rejects once `signal` aborts. */
export type RunTextPipeline = (
  text: string,
  operations: readonly TextOperation[],
  signal: AbortSignal,
) => Promise<TextPipelineResult>;

export interface TextPipelinePool {
  run: RunTextPipeline;
  /** Ends every thread at once; work still in the pool is rejected. */
  close(): Promise<void>;
}

/**
 * Threads above the first one end after this long idle: a burst reuses warm threads (each
 * loads the o200k tables, ~1 s and ~80 MB), a quiet worker gives the memory back.
 */
const IDLE_THREAD_TIMEOUT_MS = 60_000;

/**
 * The thread entry sits next to this module with this module's extension: `.ts` when run
 * from source (`node --import tsx`, vitest), `.js` when compiled. A bundler must emit it as
 * an entry point of its own at the same relative path.
 */
const THREAD_ENTRY = new URL(
  `./text-pipeline-thread${extname(fileURLToPath(import.meta.url))}`,
  import.meta.url,
);

/**
 * Compiled JavaScript threads inherit the process' execArgv as they are. TypeScript ones need
 * tsx of their own: vitest transforms the main thread without a Node loader, so threads would
 * not get one; under `node --import tsx` they inherit it and a second registration is harmless.
 */
function threadExecArgv(entry: URL): string[] | undefined {
  if (!entry.pathname.endsWith('.ts')) return undefined;
  return [...process.execArgv, '--import', import.meta.resolve('tsx')];
}

/**
 * A pool of up to `threads` worker threads for the text pipeline, so a multi-second job
 * (5 M characters) leaves the event loop free for lease heartbeats, NATS pings, inline
 * requests and health checks. Resolves once the first thread has loaded the pipeline: a
 * broken thread entry fails the service's start, not its first job.
 */
export async function startTextPipelinePool(options: {
  threads: number;
}): Promise<TextPipelinePool> {
  if (!existsSync(THREAD_ENTRY)) {
    throw new Error(`The text pipeline thread entry ${fileURLToPath(THREAD_ENTRY)} is missing`);
  }
  const piscina = new Piscina<TextPipelineTask, TextPipelineResult>({
    filename: THREAD_ENTRY.href,
    execArgv: threadExecArgv(THREAD_ENTRY),
    minThreads: 1,
    maxThreads: options.threads,
    idleTimeout: IDLE_THREAD_TIMEOUT_MS,
  });
  try {
    await piscina.run({ text: '', operations: [] });
  } catch (error) {
    await piscina.destroy();
    throw new Error('The text pipeline threads could not start', { cause: error });
  }
  return {
    // An abort while the task runs terminates its thread (piscina replaces it), so a timed-out
    // or handed-back job stops using a CPU at once.
    run: (text, operations, signal) => piscina.run({ text, operations }, { signal }),
    close: () => piscina.destroy(),
  };
}
