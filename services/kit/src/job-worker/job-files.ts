import { join } from 'node:path';
import {
  compressionRatio,
  type JobMetrics,
  type JobWorkMessage,
  RESULT_CONTENT_TYPES,
  storageKeys,
} from '@tamp/proto';
import type { ObjectStore } from '../object-store';
import { PermanentJobError } from './types';

/** What a pipeline runner needs of the object store. */
export type JobFileStore = Pick<ObjectStore, 'downloadToFile' | 'uploadFile'>;

/** Downloads the job's upload to `path`; a job without one can never run (media pipelines). */
async function downloadUpload(
  store: JobFileStore,
  work: JobWorkMessage,
  path: string,
): Promise<void> {
  if (work.input.kind !== 'upload') {
    throw new PermanentJobError(`An ${work.pipeline} job needs an uploaded file`);
  }
  await store.downloadToFile(work.input.key, path);
}

/**
 * Uploads the result file as `results/<accountId>/<jobId>/result.<extension>` (a rerun
 * overwrites it), with the content type proto gives the extension; returns its key.
 */
export async function storeResult(
  store: JobFileStore,
  work: JobWorkMessage,
  path: string,
  extension: string,
): Promise<string> {
  const key = storageKeys.result(work.accountId, work.jobId, extension);
  await store.uploadFile(key, path, RESULT_CONTENT_TYPES[extension] ?? 'application/octet-stream');
  return key;
}

/**
 * A media job file to file: the upload downloaded to `<workDir>/input`, `process` writing
 * `outputPath` (and returning the result's extension), the result stored; its key and what
 * `process` returned.
 */
export async function processUploadedFile<Result extends { extension: string }>(
  store: JobFileStore,
  work: JobWorkMessage,
  paths: { workDir: string; outputPath: string },
  process: (inputPath: string) => Promise<Result>,
): Promise<{ outputKey: string; result: Result }> {
  const inputPath = join(paths.workDir, 'input');
  await downloadUpload(store, work, inputPath);
  const result = await process(inputPath);
  const outputKey = await storeResult(store, work, paths.outputPath, result.extension);
  return { outputKey, result };
}

/**
 * The metrics every pipeline reports, the ratio by proto's one rule; `keptInput` when the result
 * is the input itself (keepInputWhenNotSmaller), whose ratio is then 1.
 */
export function sizeMetrics(
  inputSize: number,
  outputSize: number,
  startedAt: number,
  keptInput?: true,
): Pick<
  JobMetrics,
  'inputSize' | 'outputSize' | 'compressionRatio' | 'processingMs' | 'keptInput'
> {
  return {
    inputSize,
    outputSize,
    compressionRatio: compressionRatio(inputSize, outputSize),
    processingMs: Math.round(performance.now() - startedAt),
    ...(keptInput && { keptInput }),
  };
}
