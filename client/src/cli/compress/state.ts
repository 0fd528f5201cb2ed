import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pipeline } from '@tamp/proto';
import { UsageError } from '../failures';

export const STATE_FILE = '.tamp-state.json';
const LOCK_FILE = '.tamp-state.lock';
const VERSION = 1;

/**
 * How far a file got, saved after every step, so that a run stopped anywhere (Ctrl-C, a crash,
 * a lost connection) resumes without uploading, creating or paying twice:
 * - `uploaded`: the bytes are in storage (`uploadId`, usable for 24 hours);
 * - `requested`: the job request is about to be sent with `idempotencyKey` and exactly `body`,
 *   so sending it again returns the same job instead of a second one;
 * - `created`: the job exists (`jobId`): wait for it, do not create another;
 * - `done`: the output is written; `failed`: the job failed (refunded) and is tried afresh.
 */
export type EntryStatus = 'uploaded' | 'requested' | 'created' | 'done' | 'failed';

export interface StateEntry {
  status: EntryStatus;
  source: string;
  /** Relative to the output folder. */
  output: string;
  pipeline: Pipeline;
  inputSize: number;
  /** Ids are only meaningful on the API that issued them. */
  baseUrl: string;
  uploadId?: string;
  uploadedAt?: string;
  idempotencyKey?: string;
  body?: Record<string, unknown>;
  jobId?: string;
  outputSize?: number;
  ratio?: number;
  error?: string;
  updatedAt: string;
}

interface StateDocument {
  version: number;
  files: Record<string, StateEntry>;
}

/**
 * `<out>/.tamp-state.json`, keyed by content hash and processing choice. One `tamp compress`
 * at a time per output folder (a lock file holding its pid); writes are atomic renames.
 */
export class StateFile {
  private writing: Promise<void> = Promise.resolve();

  private constructor(
    readonly folder: string,
    private readonly document: StateDocument,
  ) {}

  static async open(folder: string): Promise<StateFile> {
    await mkdir(folder, { recursive: true });
    await takeLock(join(folder, LOCK_FILE));
    let document: StateDocument = { version: VERSION, files: {} };
    try {
      const parsed = JSON.parse(await readFile(join(folder, STATE_FILE), 'utf8')) as StateDocument;
      if (parsed.version === VERSION && typeof parsed.files === 'object') document = parsed;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        // Unreadable state only costs redoing work, never paying twice for what is recorded.
        await rename(join(folder, STATE_FILE), join(folder, `${STATE_FILE}.unreadable`)).catch(
          () => {},
        );
      }
    }
    return new StateFile(folder, document);
  }

  get path(): string {
    return join(this.folder, STATE_FILE);
  }

  get(key: string): StateEntry | undefined {
    return this.document.files[key];
  }

  /** Records a step; resolves once it is on disk. */
  update(key: string, entry: Omit<StateEntry, 'updatedAt'>): Promise<void> {
    this.document.files[key] = { ...entry, updatedAt: new Date().toISOString() };
    const text = `${JSON.stringify(this.document, null, 1)}\n`;
    this.writing = this.writing.then(async () => {
      const partial = `${this.path}.${process.pid}.tmp`;
      await writeFile(partial, text);
      await rename(partial, this.path);
    });
    return this.writing;
  }

  async close(): Promise<void> {
    await this.writing.catch(() => {});
    await rm(join(this.folder, LOCK_FILE), { force: true });
  }
}

async function takeLock(path: string): Promise<void> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(path, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number((await readFile(path, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(holder) && holder > 0 && isRunning(holder)) {
        throw new UsageError(
          `another tamp compress (pid ${holder}) is writing to this output folder; wait for it or use another --out`,
        );
      }
      await rm(path, { force: true });
    }
  }
  throw new UsageError(`could not lock ${path}`);
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** SHA-256 of a file's bytes, read as a stream. */
export async function hashFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** A file's key: its content and what is done to it (pipeline and resolved chain). */
export function stateKey(contentHash: string, pipeline: Pipeline, chain: unknown): string {
  return createHash('sha256')
    .update(`${contentHash}\n${pipeline}\n${JSON.stringify(chain)}`)
    .digest('hex')
    .slice(0, 40);
}
