import {
  creationRoute,
  EXTENSIONS_BY_PIPELINE,
  expandPreset,
  extensionOf,
  imageInputFitsInline,
  imageOutputFormats,
  JOB_BODIES,
  type JobListQuery,
  type JobRequestBodies,
  jobListQuery,
  LIMITS,
  PIPELINE_DEFINITIONS,
  type Pipeline,
  type PublicJob,
  type PublicJobSummary,
  type PublicOperationCatalogue,
  type PublicPresetCatalogue,
  type PublicUpload,
  type PublicUsage,
  TERMINAL_STATUSES,
  UPLOAD_FIELD_BY_PIPELINE,
  uploadRequestBody,
} from '@tamp/proto';
import { createFileSink, openFile, putObject } from '#platform';
import { JobFailedError, TampError, TampTimeoutError, TampTransferError } from './errors';
import { type RetryEvent, Transport } from './http';
import { countingStream, type FileSink } from './platform/contract';
import {
  DEFAULT_RETRY_POLICY,
  isNetworkFailure,
  type RetryPolicy,
  retryDelayMs,
  sleep,
} from './retry';
import { validated } from './validation';

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080';

export interface TampOptions {
  /** `sk_live_…`; defaults to the TAMP_API_KEY environment variable where there is one. */
  apiKey?: string;
  /** Defaults to TAMP_BASE_URL, else the local stack (http://127.0.0.1:8080). */
  baseUrl?: string;
  /** Per attempt of a request (a long-poll adds its wait). Default 60 s. */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Called before each retry: what failed and how long the client waits. */
  onRetry?: (event: RetryEvent) => void;
  /** A fetch implementation (defaults to the global one). */
  fetch?: typeof fetch;
}

/** A path (Node.js), a Blob or File, or a stream of bytes (Node.js; give `size`). */
export type UploadInput = string | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

export interface TransferProgress {
  loaded: number;
  /** Undefined when the size is not known in advance. */
  total: number | undefined;
}

export interface UploadOptions {
  /** Required for streams and nameless Blobs; its extension decides the content type. */
  filename?: string;
  /** Required for streams: presigned uploads need the exact length up front. */
  size?: number;
  onProgress?: (progress: TransferProgress) => void;
  signal?: AbortSignal;
}

export interface Upload extends PublicUpload {
  filename: string;
  size: number;
}

export interface CreateJobOptions {
  /**
   * Sent as Idempotency-Key. Default: a fresh random key for every call, so retries of this
   * call never create or charge twice. `false` sends none.
   */
  idempotencyKey?: string | false;
  /**
   * Size of the image upload, when known: an image over the inline limit is queued, and so
   * its creation can be retried safely (see README, "Retries").
   */
  inputBytes?: number;
  signal?: AbortSignal;
}

export interface WaitOptions {
  /** Give up after this long (TampTimeoutError). Default 30 minutes. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Every state read while waiting. */
  onUpdate?: (job: PublicJob) => void;
}

export interface DownloadOptions {
  onProgress?: (progress: TransferProgress) => void;
  signal?: AbortSignal;
}

export interface DownloadResult {
  bytes: number;
  /** Set when the destination was a path. */
  path?: string;
}

export type CompressInput = UploadInput | { text: string };

export type CompressProgress =
  | ({ phase: 'upload' } & TransferProgress)
  | { phase: 'wait'; job: PublicJob }
  | ({ phase: 'download' } & TransferProgress);

export interface CompressOptions {
  preset?: string;
  operations?: ReadonlyArray<{ type: string; params?: Record<string, unknown> }>;
  /** Default: from the file's extension (text for `{ text }`). */
  pipeline?: Pipeline;
  /**
   * Where the result goes: a file path (a path ending in `/` is a directory and the name is
   * the input's with the output's extension), or a WritableStream. Default: not downloaded;
   * the result's `outputUrl` is valid for an hour.
   */
  output?: string | WritableStream<Uint8Array>;
  webhookUrl?: string;
  idempotencyKey?: string;
  filename?: string;
  size?: number;
  /** How long to wait for a queued job. Default 30 minutes. */
  timeoutMs?: number;
  signal?: AbortSignal;
  onProgress?: (progress: CompressProgress) => void;
}

export interface CompressResult {
  job: PublicJob & { result: NonNullable<PublicJob['result']> };
  /** Where the result was written, when `output` was a path. */
  output?: string;
  uploadId?: string;
}

const DEFAULT_WAIT_TIMEOUT_MS = 30 * 60_000;

/**
 * The Tamp API: uploads, jobs, results, usage and the catalogues, with typed errors and
 * retries where a retry cannot create or charge twice.
 */
export class Tamp {
  readonly baseUrl: string;
  private readonly transport: Transport;
  private readonly retryPolicy: RetryPolicy;

  constructor(options: TampOptions = {}) {
    const environment = (globalThis as { process?: { env?: Record<string, string | undefined> } })
      .process?.env;
    const apiKey = options.apiKey ?? environment?.TAMP_API_KEY;
    if (apiKey === undefined || apiKey === '') {
      throw new TampError('No API key: pass { apiKey } or set TAMP_API_KEY');
    }
    this.baseUrl = options.baseUrl ?? environment?.TAMP_BASE_URL ?? DEFAULT_BASE_URL;
    this.retryPolicy = { ...DEFAULT_RETRY_POLICY, ...options.retry };
    this.transport = new Transport({
      apiKey,
      baseUrl: this.baseUrl,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      timeoutMs: options.timeoutMs ?? 60_000,
      retry: this.retryPolicy,
      onRetry: options.onRetry,
    });
  }

  /** POST /v1/upload, then the bytes to the presigned URL with exactly its content type. */
  async upload(input: UploadInput, options: UploadOptions = {}): Promise<Upload> {
    return this.uploadSource(await sourceOf(input, options), options);
  }

  private async uploadSource(source: Source, options: UploadOptions): Promise<Upload> {
    validated(uploadRequestBody, { filename: source.name, size: source.size }, 'The upload');
    const { data } = await this.transport.send<PublicUpload>({
      method: 'POST',
      path: '/v1/upload',
      body: { filename: source.name, size: source.size },
      // An upload costs nothing and expires unused: a duplicate is harmless.
      repeatable: true,
      signal: options.signal,
    });
    await this.putBytes(data, source, options);
    return { ...data, filename: source.name, size: source.size };
  }

  /**
   * POST /v1/<pipeline>. The body is checked against proto's schema first. A small image or
   * text may run inline and come back completed (HTTP 200); anything else is queued
   * (`created`). Inline creations are not deduplicated by the server, so an ambiguous failure
   * of one (503, lost connection) is not retried: it throws, and the caller decides.
   */
  async createJob<P extends Pipeline>(
    pipeline: P,
    body: JobRequestBodies[P],
    options: CreateJobOptions = {},
  ): Promise<PublicJob> {
    const parsed = validated(JOB_BODIES[pipeline], body, `The ${pipeline} job`) as CheckedBody;
    const key =
      options.idempotencyKey === false
        ? undefined
        : (options.idempotencyKey ?? globalThis.crypto.randomUUID());
    const { data } = await this.transport.send<PublicJob>({
      method: 'POST',
      path: `/v1/${pipeline}`,
      body,
      headers: key === undefined ? {} : { 'idempotency-key': key },
      repeatable: key !== undefined && isDeduplicated(pipeline, parsed, options.inputBytes),
      signal: options.signal,
    });
    return data;
  }

  /** GET /v1/jobs/:id; with `wait` (0–30 s) the server holds the answer until the job ends. */
  async getJob(id: string, options: { wait?: number; signal?: AbortSignal } = {}) {
    const { data } = await this.transport.send<PublicJob>({
      method: 'GET',
      path: `/v1/jobs/${encodeURIComponent(id)}`,
      query: { wait: options.wait },
      repeatable: true,
      signal: options.signal,
      holdMs: (options.wait ?? 0) * 1000,
    });
    return data;
  }

  /** Long-polls until the job is completed or failed: one request per 30 s at most. */
  async waitForJob(id: string, options: WaitOptions = {}): Promise<PublicJob> {
    const deadline = Date.now() + (options.timeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS);
    for (;;) {
      // `wait` is whole seconds: rounded down so the server never holds past the caller's time;
      // the last fraction of a second is slept here, followed by one final read.
      const remainingMs = deadline - Date.now();
      const wait = Math.max(0, Math.min(LIMITS.waitSeconds.max, Math.floor(remainingMs / 1000)));
      const job = await this.getJob(id, { wait, signal: options.signal });
      options.onUpdate?.(job);
      if (TERMINAL_STATUSES.includes(job.status)) return job;
      if (Date.now() >= deadline) throw new TampTimeoutError(job);
      if (wait === 0) await sleep(deadline - Date.now(), options.signal);
    }
  }

  /**
   * Writes a completed job's output to a path (atomically: a temporary file renamed into
   * place) or a WritableStream. Accepts a job id, or a job read within the hour its
   * `outputUrl` is valid (an expired link is refreshed once).
   */
  async download(
    jobOrId: string | PublicJob,
    destination: string | WritableStream<Uint8Array>,
    options: DownloadOptions = {},
  ): Promise<DownloadResult> {
    let job = typeof jobOrId === 'string' ? await this.getJob(jobOrId, options) : jobOrId;
    const result = job.result;
    if (job.status !== 'completed' || result === undefined) {
      throw new TampError(`job ${job.id} is ${job.status}: there is no output to download`);
    }
    if (result.outputText !== undefined) {
      const bytes = new TextEncoder().encode(result.outputText);
      const sink = await sinkOf(destination);
      await writeAll(sink, bytes, options);
      return {
        bytes: bytes.byteLength,
        ...(typeof destination === 'string' && { path: destination }),
      };
    }
    let refreshed = typeof jobOrId === 'string';
    for (let retry = 1; ; retry++) {
      const outputUrl = job.result?.outputUrl;
      if (outputUrl === undefined) {
        throw new TampError(`job ${job.id}: the output has expired (results are kept 7 days)`);
      }
      try {
        const response = await fetch(outputUrl, withSignal(options.signal));
        if (response.status === 403 && !refreshed) {
          // Signed links last an hour; a fresh read signs a new one.
          await response.body?.cancel();
          job = await this.getJob(job.id, options);
          refreshed = true;
          continue;
        }
        if (!response.ok || response.body === null) {
          throw new TampTransferError(
            `download of job ${job.id} output failed: HTTP ${response.status}`,
            response.status,
            await response.text(),
          );
        }
        const declared = response.headers.get('content-length');
        const total = declared === null ? undefined : Number(declared);
        const sink = await sinkOf(destination);
        let loaded = 0;
        try {
          await response.body
            .pipeThrough(
              countingStream((bytes) => {
                loaded = bytes;
                options.onProgress?.({ loaded, total });
              }),
            )
            .pipeTo(sink.writable, withSignal(options.signal));
        } catch (error) {
          await sink.discard();
          throw error;
        }
        await sink.commit();
        return { bytes: loaded, ...(typeof destination === 'string' && { path: destination }) };
      } catch (error) {
        // Only a path can be written again from the start; a stream may hold a partial copy.
        const again =
          typeof destination === 'string' &&
          !options.signal?.aborted &&
          (isNetworkFailure(error) || isServerTrouble(error)) &&
          retry <= this.retryPolicy.maxRetries;
        if (!again) throw error;
        await sleep(retryDelayMs(retry, undefined, this.retryPolicy) ?? 0, options.signal);
      }
    }
  }

  /**
   * The whole flow in one call: upload (or inline text), create the job, wait for it, and
   * write the output. Throws JobFailedError when the job fails (its credits are refunded).
   */
  async compress(input: CompressInput, options: CompressOptions = {}): Promise<CompressResult> {
    const { signal, onProgress } = options;
    const choice = {
      ...(options.preset !== undefined && { preset: options.preset }),
      ...(options.operations !== undefined && { operations: options.operations }),
      ...(options.webhookUrl !== undefined && { webhookUrl: options.webhookUrl }),
    };
    const idempotencyKey = options.idempotencyKey ?? globalThis.crypto.randomUUID();
    let job: PublicJob;
    let upload: Upload | undefined;
    let sourceName: string | undefined;
    if (isInlineText(input)) {
      job = await this.createJob('text', { text: input.text, ...choice } as never, {
        idempotencyKey,
        signal,
      });
    } else {
      const source = await sourceOf(input, { filename: options.filename, size: options.size });
      sourceName = source.name;
      const pipeline = options.pipeline ?? pipelineFor(source.name);
      upload = await this.uploadSource(source, {
        signal,
        onProgress: (progress) => onProgress?.({ phase: 'upload', ...progress }),
      });
      job = await this.createJob(
        pipeline,
        { [UPLOAD_FIELD_BY_PIPELINE[pipeline]]: upload.id, ...choice } as never,
        { idempotencyKey, inputBytes: upload.size, signal },
      );
    }
    if (!TERMINAL_STATUSES.includes(job.status)) {
      onProgress?.({ phase: 'wait', job });
      job = await this.waitForJob(job.id, {
        signal,
        timeoutMs: options.timeoutMs,
        onUpdate: (update) => onProgress?.({ phase: 'wait', job: update }),
      });
    }
    if (job.status !== 'completed' || job.result === undefined) throw new JobFailedError(job);
    const completed = job as CompressResult['job'];
    const base = { job: completed, ...(upload !== undefined && { uploadId: upload.id }) };
    if (options.output === undefined) return base;
    const destination =
      typeof options.output === 'string' && options.output.endsWith('/')
        ? `${options.output}${outputNameFor(sourceName ?? 'text.txt', completed)}`
        : options.output;
    await this.download(completed, destination, {
      onProgress: (progress) => onProgress?.({ phase: 'download', ...progress }),
      ...(signal !== undefined && { signal }),
    });
    return { ...base, ...(typeof destination === 'string' && { output: destination }) };
  }

  /** Every job of the account, newest first, following `nextCursor` page by page. */
  async *listJobs(
    query: Omit<JobListQuery, 'cursor'> & { signal?: AbortSignal } = {},
  ): AsyncGenerator<PublicJobSummary> {
    const { signal, ...filters } = query;
    const checked = validated(jobListQuery, filters, 'The job list query');
    let cursor: string | undefined;
    do {
      const { data } = await this.transport.send<{
        items: PublicJobSummary[];
        nextCursor: string | null;
      }>({
        method: 'GET',
        path: '/v1/jobs',
        query: { ...checked, cursor },
        repeatable: true,
        signal,
      });
      yield* data.items;
      cursor = data.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** GET /v1/usage/current: this billing period's totals per pipeline. */
  async usage(options: { signal?: AbortSignal } = {}): Promise<PublicUsage> {
    return this.read<PublicUsage>('/v1/usage/current', options.signal);
  }

  /** GET /v1/<pipeline>/presets: each preset and the chain of operations it expands to. */
  async presets(pipeline: Pipeline, options: { signal?: AbortSignal } = {}) {
    return this.read<PublicPresetCatalogue>(`/v1/${pipeline}/presets`, options.signal);
  }

  /** GET /v1/<pipeline>/operations: each operation's parameters, ranges and defaults. */
  async operations(pipeline: Pipeline, options: { signal?: AbortSignal } = {}) {
    return this.read<PublicOperationCatalogue>(`/v1/${pipeline}/operations`, options.signal);
  }

  private async read<Data>(path: string, signal: AbortSignal | undefined): Promise<Data> {
    const { data } = await this.transport.send<Data>({
      method: 'GET',
      path,
      repeatable: true,
      signal,
    });
    return data;
  }

  /** The PUT is repeated after a network failure or a storage 5xx when the bytes can be re-read. */
  private async putBytes(upload: PublicUpload, source: Source, options: UploadOptions) {
    for (let retry = 1; ; retry++) {
      let failure: unknown;
      try {
        const answer = await putObject({
          url: upload.uploadUrl,
          body: source.blob ?? source.stream(),
          size: source.size,
          contentType: upload.contentType,
          onProgress: (loaded) => options.onProgress?.({ loaded, total: source.size }),
          signal: options.signal,
        });
        if (answer.status >= 200 && answer.status < 300) {
          options.onProgress?.({ loaded: source.size, total: source.size });
          return;
        }
        failure = new TampTransferError(
          `upload of ${source.name} to storage failed: HTTP ${answer.status}` +
            (answer.status === 403
              ? ` (the URL is signed for Content-Type ${upload.contentType} and 15 minutes)`
              : ''),
          answer.status,
          answer.body,
        );
      } catch (error) {
        failure = error;
      }
      const again =
        source.blob !== undefined &&
        !options.signal?.aborted &&
        (isNetworkFailure(failure) || isServerTrouble(failure)) &&
        retry <= this.retryPolicy.maxRetries;
      if (!again) throw failure;
      await sleep(retryDelayMs(retry, undefined, this.retryPolicy) ?? 0, options.signal);
    }
  }
}

/** The pipeline that takes a file, by its extension (proto's table). */
export function pipelineFor(filename: string): Pipeline {
  const extension = extensionOf(filename);
  for (const [pipeline, extensions] of Object.entries(EXTENSIONS_BY_PIPELINE)) {
    if ((extensions as readonly string[]).includes(extension ?? '')) return pipeline as Pipeline;
  }
  throw new TampError(
    `${filename}: no pipeline takes ${extension ?? 'files without an extension'} ` +
      `(accepted: ${Object.values(EXTENSIONS_BY_PIPELINE).flat().join(' ')})`,
  );
}

/** `photo.jpg` compressed to WebP is `photo.webp`: the output's extension from its link. */
export function outputNameFor(inputName: string, job: PublicJob): string {
  const base = inputName.replace(/^.*[\\/]/, '');
  const stem = base.includes('.') ? base.slice(0, base.lastIndexOf('.')) : base;
  return `${stem}.${outputExtensionOf(job)}`;
}

export function outputExtensionOf(job: PublicJob): string {
  const url = job.result?.outputUrl;
  if (url === undefined) return 'txt';
  const name = new URL(url).pathname.split('/').at(-1) ?? '';
  return extensionOf(name)?.slice(1) ?? 'bin';
}

/**
 * Whether the server deduplicates this creation by its Idempotency-Key: only queued ones are
 * (proto's creationRoute). An image's route depends on its size; unknown size counts as inline.
 */
interface CheckedBody {
  preset?: string;
  operations?: readonly { type: string; params: unknown }[];
  webhookUrl?: string;
  text?: string;
}

function isDeduplicated(
  pipeline: Pipeline,
  body: CheckedBody,
  inputBytes: number | undefined,
): boolean {
  const definition = PIPELINE_DEFINITIONS[pipeline];
  const chain =
    body.preset !== undefined
      ? expandPreset(definition, body.preset)
      : definition.finalizeChain(body.operations ?? []);
  const encode = chain.at(-1);
  const route = creationRoute({
    pipeline,
    webhookUrl: body.webhookUrl,
    inlineTextBytes:
      body.text === undefined ? undefined : new TextEncoder().encode(body.text).byteLength,
    imageFormats:
      encode?.type === 'encode' && pipeline === 'image'
        ? imageOutputFormats(encode.params as { format: string; accept?: string[] })
        : undefined,
  });
  if (route === 'by-input-size')
    return inputBytes !== undefined && !imageInputFitsInline(inputBytes);
  return route === 'queued';
}

interface Source {
  name: string;
  size: number;
  /** Set when the bytes can be read again (a Blob, a file): the PUT can then be retried. */
  blob: Blob | undefined;
  stream(): ReadableStream<Uint8Array>;
}

async function sourceOf(input: UploadInput, options: UploadOptions): Promise<Source> {
  if (typeof input === 'string') {
    const { blob, name } = await openFile(input);
    return blobSource(blob, options.filename ?? name);
  }
  if (input instanceof Blob) {
    const name = options.filename ?? (input as { name?: string }).name;
    if (name === undefined || name === '') {
      throw new TampError(
        'a Blob without a name needs { filename } (its extension decides the type)',
      );
    }
    return blobSource(input, name);
  }
  const { filename, size } = options;
  if (filename === undefined || size === undefined) {
    throw new TampError('a stream needs { filename, size }: presigned uploads need the exact size');
  }
  let used = false;
  return {
    name: filename,
    size,
    blob: undefined,
    stream() {
      if (used) throw new TampError('a stream can be sent once; pass a path or a Blob to retry');
      used = true;
      return input instanceof ReadableStream ? input : streamOf(input);
    },
  };
}

function blobSource(blob: Blob, name: string): Source {
  return { name, size: blob.size, blob, stream: () => blob.stream() };
}

function streamOf(iterable: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array> {
  const iterator = iterable[Symbol.asyncIterator]();
  return new ReadableStream({
    async pull(controller) {
      const { value, done } = await iterator.next();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    async cancel(reason) {
      await iterator.return?.(reason);
    },
  });
}

function isInlineText(input: CompressInput): input is { text: string } {
  return (
    typeof input === 'object' &&
    input !== null &&
    !(input instanceof Blob) &&
    !(input instanceof ReadableStream) &&
    typeof (input as { text?: unknown }).text === 'string'
  );
}

function isServerTrouble(error: unknown): boolean {
  return error instanceof TampTransferError && error.status >= 500;
}

async function sinkOf(destination: string | WritableStream<Uint8Array>): Promise<FileSink> {
  if (typeof destination === 'string') return createFileSink(destination);
  return { writable: destination, commit: async () => {}, discard: async () => {} };
}

async function writeAll(sink: FileSink, bytes: Uint8Array, options: DownloadOptions) {
  const writer = sink.writable.getWriter();
  try {
    await writer.write(bytes);
    await writer.close();
  } catch (error) {
    await sink.discard();
    throw error;
  }
  await sink.commit();
  options.onProgress?.({ loaded: bytes.byteLength, total: bytes.byteLength });
}

function withSignal(signal: AbortSignal | undefined): { signal?: AbortSignal } {
  return signal === undefined ? {} : { signal };
}
