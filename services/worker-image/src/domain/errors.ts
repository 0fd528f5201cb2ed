import type { ImageFormat } from '@tamp/proto';

/**
 * Failures caused by the image itself. Retrying the same input cannot succeed, so job
 * processing should fail the job at once instead of spending its retries. The message is
 * written for the API user (it becomes the job's `error`).
 */
export abstract class ImageProcessingError extends Error {
  abstract readonly code: 'IMAGE_TOO_LARGE' | 'IMAGE_UNREADABLE';
  readonly permanent = true;
}

interface PixelCount {
  width: number;
  height: number;
  frames: number;
  pixels: number;
  limit: number;
}

export type ImageLimitDetail =
  | ({
      /**
       * `input-pixels`: the decoded input (all frames that would be decoded) is over the pixel
       * budget; `output-pixels`: a resize would produce more (e.g. cover on a sliver).
       */
      kind: 'input-pixels' | 'output-pixels';
    } & PixelCount)
  | {
      /** The output format cannot hold an image this wide or tall. */
      kind: 'format-dimensions';
      format: ImageFormat;
      width: number;
      height: number;
      maxDimension: number;
    }
  | {
      /** Even the leanest way to write this format needs more memory than the worker has. */
      kind: 'memory';
      format: ImageFormat;
      width: number;
      height: number;
      neededBytes: number;
      budgetBytes: number;
    };

function megapixels(pixels: number): string {
  return `${(pixels / 1e6).toFixed(1)} megapixels`;
}

function megabytes(bytes: number): string {
  return `${Math.ceil(bytes / 1024 / 1024)} MB`;
}

function describeSize(detail: { width: number; height: number; frames: number }): string {
  return detail.frames > 1
    ? `${detail.frames} frames of ${detail.width}×${detail.height}`
    : `${detail.width}×${detail.height}`;
}

function limitMessage(detail: ImageLimitDetail): string {
  switch (detail.kind) {
    case 'input-pixels':
      return `Image is ${describeSize(detail)} (${megapixels(detail.pixels)}), over the limit of ${megapixels(detail.limit)}`;
    case 'output-pixels':
      return `Resizing would produce ${describeSize(detail)} (${megapixels(detail.pixels)}), over the limit of ${megapixels(detail.limit)}`;
    case 'format-dimensions':
      return `${detail.format.toUpperCase()} output is limited to ${detail.maxDimension} pixels per side; the result would be ${detail.width}×${detail.height}`;
    case 'memory':
      return `Writing ${detail.width}×${detail.height} as ${detail.format.toUpperCase()} needs about ${megabytes(detail.neededBytes)} of memory, over this worker's image budget of ${megabytes(detail.budgetBytes)}; add a resize to the chain or choose another format`;
  }
}

/** The image (or what the chain would make of it) is too large to process. */
export class ImageLimitError extends ImageProcessingError {
  readonly code = 'IMAGE_TOO_LARGE';
  readonly detail: ImageLimitDetail;

  constructor(detail: ImageLimitDetail) {
    super(limitMessage(detail));
    this.name = 'ImageLimitError';
    this.detail = detail;
  }
}

export type ImageDecodeFailure = 'corrupt' | 'unsupported-format';

/** The input cannot be decoded: corrupt, truncated, or not a JPEG/PNG/WebP image. */
export class ImageDecodeError extends ImageProcessingError {
  readonly code = 'IMAGE_UNREADABLE';
  readonly reason: ImageDecodeFailure;

  constructor(reason: ImageDecodeFailure, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ImageDecodeError';
    this.reason = reason;
  }
}
