import { join } from 'node:path';
import { type JobFileStore, type ProcessJob, processUploadedFile, sizeMetrics } from '@tamp/kit';
import { processImage } from '../adapters/sharp-pipeline';
import type { MemoryBudget } from '../domain/memory-budget';

export interface ImageJobOptions {
  store: JobFileStore;
  /** Pixel budget of one image (decoded input and every resize), e.g. 100 MP. */
  limitInputPixels: number;
  /** Image memory shared by every job of this worker, queued and inline. */
  memory: MemoryBudget;
}

/**
 * An image job: the upload is streamed to a temp file, processed by sharp file to file, and
 * the result uploaded as `results/<accountId>/<jobId>/result.<ext>` (a rerun overwrites it).
 * The extension is the format processImage wrote: for auto, the one it chose, or the input's
 * when the input itself is the result.
 */
export function createImageJobProcessor(options: ImageJobOptions): ProcessJob<'image'> {
  return async (work, { workspace, signal, logger }) => {
    const workDir = await workspace();
    const startedAt = performance.now();
    const outputPath = join(workDir, 'output');
    const { outputKey, result: image } = await processUploadedFile(
      options.store,
      work,
      { workDir, outputPath },
      (inputPath) =>
        processImage({
          inputPath,
          outputPath,
          operations: work.operations,
          limitInputPixels: options.limitInputPixels,
          memory: options.memory,
          signal,
        }),
    );
    if (image.encoderSteppedDown) {
      logger.info(
        {
          estimatedMemoryBytes: image.estimatedMemoryBytes,
          budgetBytes: options.memory.totalBytes,
        },
        'used a leaner encoder mode to fit the memory budget',
      );
    }
    return {
      outputKey,
      outputText: null,
      metrics: {
        ...sizeMetrics(image.inputSize, image.outputSize, startedAt, image.keptInput),
        operationsApplied: work.operations.map((operation) => operation.type),
        width: image.widthOut,
        height: image.heightOut,
        format: image.format,
        ...(image.ssimTarget !== undefined && { ssimTarget: image.ssimTarget }),
        ...(image.ssim !== undefined && { ssim: image.ssim }),
        ...(image.candidates !== undefined && { candidates: image.candidates }),
      },
      usage: { inputBytes: image.inputSize, megapixels: (image.widthIn * image.heightIn) / 1e6 },
    };
  };
}
