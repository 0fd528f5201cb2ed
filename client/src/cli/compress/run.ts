import { copyFile, mkdir, stat } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { type PublicJob, TERMINAL_STATUSES, UPLOAD_FIELD_BY_PIPELINE } from '@tamp/proto';
import pLimit from 'p-limit';
import type { Tamp } from '../../client';
import { TampApiError } from '../../errors';
import { describeFailure, type Failure, stopsTheRun } from '../failures';
import { type PlannedFile, withOutputOf } from './plan';
import { hashFile, type StateEntry, type StateFile, stateKey } from './state';

export type Phase = 'read' | 'upload' | 'create' | 'wait' | 'download';

export interface PhaseDetail {
  loaded?: number;
  total?: number;
  /** The job's status while waiting. */
  status?: string;
}

export type OutcomeStatus = 'done' | 'skipped' | 'failed' | 'interrupted' | 'not-started';

export interface FileOutcome {
  file: PlannedFile;
  status: OutcomeStatus;
  /** Picked up from an earlier run (an upload, a request or a job already made). */
  resumed: boolean;
  jobId?: string;
  inputSize?: number;
  outputSize?: number;
  ratio?: number;
  ms: number;
  failure?: Failure;
}

/** What the runner tells the display. */
export interface RunObserver {
  phase(file: PlannedFile, phase: Phase, detail?: PhaseDetail): void;
  finished(outcome: FileOutcome): void;
}

export interface RunOptions {
  tamp: Tamp;
  state: StateFile;
  out: string;
  concurrency: number;
  /** Ignore recorded results and compress everything again. */
  force: boolean;
  /** Ctrl-C: stop starting files, stop transfers and waits; creations in flight finish. */
  interrupt: AbortSignal;
  observer: RunObserver;
}

/** Uploads a day old are past their 24-hour lifetime soon: upload again instead. */
const UPLOAD_REUSE_MS = 23 * 60 * 60 * 1000;

/** Errors that mean a recorded upload or request cannot be replayed: start the file afresh. */
const STALE_RECORD_CODES = new Set([
  'UPLOAD_EXPIRED',
  'UPLOAD_NOT_FOUND',
  'UPLOAD_NOT_COMPLETED',
  'IDEMPOTENCY_KEY_REUSED',
  'JOB_NOT_FOUND',
]);

/**
 * Compresses the planned files, `concurrency` at a time, recording each step in the state file.
 * Returns one outcome per file, and the failure that stopped the run early, if any.
 */
export async function runCompress(
  files: readonly PlannedFile[],
  options: RunOptions,
): Promise<{ outcomes: FileOutcome[]; fatal?: unknown }> {
  const limit = pLimit(options.concurrency);
  let fatal: unknown;
  const byKey = new Map<string, Promise<FileOutcome>>();
  const outcomes = await Promise.all(
    files.map((file) =>
      limit(async () => {
        if (options.interrupt.aborted || fatal !== undefined) {
          const outcome: FileOutcome = {
            file,
            status: options.interrupt.aborted ? 'interrupted' : 'not-started',
            resumed: false,
            ms: 0,
          };
          options.observer.finished(outcome);
          return outcome;
        }
        const outcome = await new FileRun(file, options, byKey).run().catch((error: unknown) => {
          if (fatal === undefined && stopsTheRun(error)) fatal = error;
          return failureOutcome(file, error, options);
        });
        options.observer.finished(outcome);
        return outcome;
      }),
    ),
  );
  return { outcomes, ...(fatal !== undefined && { fatal }) };
}

function failureOutcome(file: PlannedFile, error: unknown, options: RunOptions): FileOutcome {
  if (options.interrupt.aborted) return { file, status: 'interrupted', resumed: false, ms: 0 };
  return {
    file,
    status: 'failed',
    resumed: false,
    ms: 0,
    failure: describeFailure(error, options.tamp.baseUrl),
  };
}

class FileRun {
  private readonly started = performance.now();
  private key = '';
  private record!: Omit<StateEntry, 'updatedAt'>;
  private resumed = false;

  constructor(
    /** Its output renamed once known when the job chooses the format (withOutputOf). */
    private file: PlannedFile,
    private readonly options: RunOptions,
    private readonly byKey: Map<string, Promise<FileOutcome>>,
  ) {}

  async run(): Promise<FileOutcome> {
    const { file, options } = this;
    options.observer.phase(file, 'read');
    const inputSize = (await stat(file.path)).size;
    this.key = stateKey(await hashFile(file.path), file.pipeline, file.choice.chain);
    // The same bytes twice in one run: compress once, copy the result.
    const twin = this.byKey.get(this.key);
    if (twin !== undefined) return this.copyOf(await twin, inputSize);
    const own = this.process(inputSize);
    this.byKey.set(this.key, own);
    return own;
  }

  private async process(inputSize: number): Promise<FileOutcome> {
    const { file, options } = this;
    const { state, tamp } = options;
    this.record = {
      status: 'uploaded',
      source: file.display,
      output: relative(options.out, file.output),
      pipeline: file.pipeline,
      inputSize,
      baseUrl: tamp.baseUrl,
    };
    let entry = state.get(this.key);
    if (entry?.status === 'done' && !options.force) {
      const recorded = join(options.out, entry.output);
      if ((await sizeOf(recorded)) === entry.outputSize) {
        this.file = withOutputOf(file, recorded);
        if (recorded !== this.file.output) await copyInto(recorded, this.file.output);
        return this.outcome('skipped', entry);
      }
    }
    if (
      entry !== undefined &&
      (options.force || entry.baseUrl !== tamp.baseUrl || entry.status === 'failed')
    ) {
      entry = undefined;
    }
    this.resumed = entry !== undefined;
    if (entry !== undefined) this.record = { ...this.record, ...entry, ...pick(this.record) };

    let job: PublicJob | undefined;
    if (entry?.jobId !== undefined && (entry.status === 'created' || entry.status === 'done')) {
      job = await this.recordedJob(entry.jobId);
      if (job === undefined) entry = undefined;
    } else if (entry?.status === 'requested') {
      job = await this.replayRequest(entry);
      if (job === undefined) entry = undefined;
    }
    // An upload recorded without a request is reused (no second upload).
    if (job === undefined) job = await this.createAfresh(entry);

    if (!TERMINAL_STATUSES.includes(job.status)) {
      options.observer.phase(file, 'wait', { status: job.status });
      job = await tamp.waitForJob(job.id, {
        signal: options.interrupt,
        onUpdate: (update) => options.observer.phase(file, 'wait', { status: update.status }),
      });
    }
    if (job.status === 'failed' || job.result === undefined) {
      await this.save({ status: 'failed', error: job.error ?? 'failed' });
      return {
        ...this.outcome('failed'),
        failure: {
          message: `job ${job.id} failed: ${job.error ?? 'no reason given'}`,
          exitCode: 1,
        },
      };
    }
    if (job.result.outputUrl !== undefined) this.file = withOutputOf(file, job.result.outputUrl);
    const named = this.file;
    options.observer.phase(named, 'download', { loaded: 0 });
    await tamp.download(job, named.output, {
      signal: options.interrupt,
      onProgress: ({ loaded, total }) =>
        options.observer.phase(named, 'download', {
          loaded,
          ...(total !== undefined && { total }),
        }),
    });
    const { outputSize, compressionRatio } = job.result.metrics;
    await this.save({
      status: 'done',
      output: relative(options.out, named.output),
      outputSize,
      ratio: compressionRatio,
    });
    return this.outcome('done');
  }

  /**
   * A job recorded by an earlier run: waited for (or read again to download its output again),
   * never made again. Undefined when the API no longer knows it.
   */
  private async recordedJob(jobId: string): Promise<PublicJob | undefined> {
    try {
      return await this.options.tamp.getJob(jobId, { signal: this.options.interrupt });
    } catch (error) {
      if (isStale(error)) return undefined;
      throw error;
    }
  }

  /**
   * The earlier run stopped after deciding on a request and its Idempotency-Key: sending the
   * same request with the same key returns the job it made, if it made one.
   */
  private async replayRequest(entry: StateEntry): Promise<PublicJob | undefined> {
    if (entry.body === undefined || entry.idempotencyKey === undefined) return undefined;
    try {
      return await this.create(entry.body, entry.idempotencyKey);
    } catch (error) {
      if (isStale(error)) return undefined;
      throw error;
    }
  }

  private async createAfresh(entry: StateEntry | undefined): Promise<PublicJob> {
    const { file, options } = this;
    let uploadId = entry?.uploadId;
    const uploadedAt = entry?.uploadedAt === undefined ? 0 : Date.parse(entry.uploadedAt);
    if (uploadId === undefined || Date.now() - uploadedAt > UPLOAD_REUSE_MS) {
      options.observer.phase(file, 'upload', { loaded: 0, total: this.record.inputSize });
      const upload = await options.tamp.upload(file.path, {
        signal: options.interrupt,
        onProgress: ({ loaded, total }) =>
          options.observer.phase(file, 'upload', { loaded, ...(total !== undefined && { total }) }),
      });
      uploadId = upload.id;
      await this.save({ status: 'uploaded', uploadId, uploadedAt: new Date().toISOString() });
    }
    const body = { [UPLOAD_FIELD_BY_PIPELINE[file.pipeline]]: uploadId, ...file.choice.body };
    const idempotencyKey = globalThis.crypto.randomUUID();
    // Written before sending: if this process dies mid-request, the next run replays it.
    await this.save({ status: 'requested', body, idempotencyKey });
    return this.create(body, idempotencyKey);
  }

  /**
   * Sent without the interrupt signal: a creation in flight at Ctrl-C finishes and its job is
   * recorded, rather than leaving the next run unsure whether it exists.
   */
  private async create(body: Record<string, unknown>, idempotencyKey: string) {
    const { file, options } = this;
    options.observer.phase(file, 'create');
    const job = await options.tamp.createJob(file.pipeline, body as never, {
      idempotencyKey,
      inputBytes: this.record.inputSize,
    });
    await this.save({ status: 'created', jobId: job.id });
    options.interrupt.throwIfAborted();
    return job;
  }

  private async copyOf(twin: FileOutcome, inputSize: number): Promise<FileOutcome> {
    if (twin.status !== 'done' && twin.status !== 'skipped') {
      return { ...twin, file: this.file, ms: this.elapsed() };
    }
    this.file = withOutputOf(this.file, twin.file.output);
    await copyInto(twin.file.output, this.file.output);
    return { ...twin, file: this.file, inputSize, ms: this.elapsed() };
  }

  private save(change: Partial<Omit<StateEntry, 'updatedAt'>>): Promise<void> {
    this.record = { ...this.record, ...change };
    return this.options.state.update(this.key, this.record);
  }

  private outcome(status: OutcomeStatus, entry: Partial<StateEntry> = this.record): FileOutcome {
    return {
      file: this.file,
      status,
      resumed: this.resumed,
      ...(entry.jobId !== undefined && { jobId: entry.jobId }),
      inputSize: this.record.inputSize,
      ...(entry.outputSize !== undefined && { outputSize: entry.outputSize }),
      ...(entry.ratio !== undefined && { ratio: entry.ratio }),
      ms: status === 'skipped' ? 0 : this.elapsed(),
    };
  }

  private elapsed(): number {
    return performance.now() - this.started;
  }
}

/** What this run knows better than the record: where this file is and where its output goes. */
function pick(record: Omit<StateEntry, 'updatedAt'>) {
  const { source, output, pipeline, inputSize, baseUrl } = record;
  return { source, output, pipeline, inputSize, baseUrl };
}

function isStale(error: unknown): boolean {
  return error instanceof TampApiError && STALE_RECORD_CODES.has(error.code);
}

async function sizeOf(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch {
    return undefined;
  }
}

async function copyInto(from: string, to: string): Promise<void> {
  if (from === to) return;
  await mkdir(dirname(to), { recursive: true });
  await copyFile(from, to);
}
