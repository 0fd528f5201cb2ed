import { existsSync } from 'node:fs';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Threads a pool keeps beyond its minimum end after this long idle: a burst reuses warm threads
 * (a pipeline thread loads the o200k tables, ~1 s and ~80 MB; a PDF thread pdf.js), a quiet
 * worker gives the memory back.
 */
export const IDLE_THREAD_TIMEOUT_MS = 60_000;

/**
 * Where a piscina pool of this service finds its thread entry, and how a thread starts it.
 *
 * The entry sits in this folder with this module's extension: `.ts` when run from source
 * (`node --import tsx`, vitest), `.mjs` when bundled, where this module is part of `main.mjs`
 * and every entry is emitted beside it (`scripts/build/bundle.ts`, `EXTRA_ENTRIES`).
 *
 * Compiled JavaScript threads inherit the process' execArgv as they are. TypeScript ones need
 * tsx of their own: vitest transforms the main thread without a Node loader, so threads would
 * not get one; under `node --import tsx` they inherit it and a second registration is harmless.
 */
export function threadEntryOptions(name: string): { filename: string; execArgv?: string[] } {
  const entry = new URL(`./${name}${extname(fileURLToPath(import.meta.url))}`, import.meta.url);
  if (!existsSync(entry)) {
    throw new Error(`The thread entry ${fileURLToPath(entry)} is missing`);
  }
  if (!entry.pathname.endsWith('.ts')) return { filename: entry.href };
  return {
    filename: entry.href,
    execArgv: [...process.execArgv, '--import', import.meta.resolve('tsx')],
  };
}
