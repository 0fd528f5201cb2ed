import { join } from 'node:path';
import { type ObjectStore, PermanentJobError, type ProcessJob } from '@tamp/kit';
import { compressionRatio, storageKeys } from '@tamp/proto';
import { processImage } from '../adapters/sharp-pipeline';
import type { MemoryBudget } from '../domain/memory-budget';

export const IMAGE_CONTENT_TYPES: Record<string, string> = {
  webp: 'image/webp',
  avif: 'image/avif',
  jpg: 'image/jpeg',
  png: 'image/png',
};

export interface ImageJobOptions {
  store: Pick<ObjectStore, 'downloadToFile' | 'uploadFile'>;
  /** Pixel budget of one image (decoded input and every resize), e.g. 100 MP. */
  limitInputPixels: number;
  /** Image memory shared by every job of this worker, queued and inline. */
  memory: MemoryBudget;
}

/**
 * An image job: the upload is streamed to a temp file, processed by sharp file to file, and
 * the result uploaded as `results/<accountId>/<jobId>/result.<ext>` (a rerun overwrites it).
 */
export function createImageJobProcessor(options: ImageJobOptions): ProcessJob {
  return async (work, { workDir, signal, logger }) => {
    const startedAt = performance.now();
    if (work.pipeline !== 'image') {
      throw new PermanentJobError(`The image worker cannot run a ${work.pipeline} job`);
    }
    if (work.input.kind !== 'upload') {
      throw new PermanentJobError('An image job needs an uploaded file');
    }
    const inputPath = join(workDir, 'input');
    const outputPath = join(workDir, 'output');
    await options.store.downloadToFile(work.input.key, inputPath);
    const image = await processImage({
      inputPath,
      outputPath,
      operations: work.operations,
      limitInputPixels: options.limitInputPixels,
      memory: options.memory,
      signal,
    });
    if (image.encoderSteppedDown) {
      logger.info(
        {
          estimatedMemoryBytes: image.estimatedMemoryBytes,
          budgetBytes: options.memory.totalBytes,
        },
        'used a leaner encoder mode to fit the memory budget',
      );
    }
    const outputKey = storageKeys.result(work.accountId, work.jobId, image.extension);
    await options.store.uploadFile(
      outputKey,
      outputPath,
      IMAGE_CONTENT_TYPES[image.extension] ?? 'application/octet-stream',
    );
    return {
      outputKey,
      outputText: null,
      metrics: {
        inputSize: image.inputSize,
        outputSize: image.outputSize,
        compressionRatio: compressionRatio(image.inputSize, image.outputSize),
        operationsApplied: work.operations.map((operation) => operation.type),
        processingMs: Math.round(performance.now() - startedAt),
        width: image.widthOut,
        height: image.heightOut,
        format: image.format,
      },
      usage: { inputBytes: image.inputSize, megapixels: (image.widthIn * image.heightIn) / 1e6 },
    };
  };
}
