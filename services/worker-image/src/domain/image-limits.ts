import type { ImageFormat } from '@tamp/proto';
import { ImageLimitError } from './errors';
import type { Dimensions } from './resize-geometry';

/**
 * Largest width or height each output format can hold, as libvips enforces them: WebP's
 * bitstream stores 14-bit sizes, libheif caps AVIF at 16384, JPEG stores 16-bit sizes. PNG's
 * limit (2^31 - 1) is far beyond any pixel budget, so it is not listed.
 */
export const MAX_DIMENSION_BY_FORMAT: Partial<Record<ImageFormat, number>> = {
  webp: 16383,
  avif: 16384,
  jpeg: 65535,
};

/** Whether an output of `size` fits what `format` can hold per side. */
export function fitsFormatDimensions(format: ImageFormat, size: Dimensions): boolean {
  const maxDimension = MAX_DIMENSION_BY_FORMAT[format];
  return maxDimension === undefined || Math.max(size.width, size.height) <= maxDimension;
}

/** Accepted input formats, as sharp's metadata names them (the API accepts .jpg/.png/.webp). */
export const INPUT_FORMATS = ['jpeg', 'png', 'webp'] as const;
export type InputFormat = (typeof INPUT_FORMATS)[number];

export function isInputFormat(format: string | undefined): format is InputFormat {
  return INPUT_FORMATS.includes(format as InputFormat);
}

/** Throws ImageLimitError when decoding `frames` frames of `size` would exceed the budget. */
export function assertInputWithinBudget(size: Dimensions, frames: number, limit: number): void {
  const pixels = size.width * size.height * frames;
  if (pixels > limit) {
    throw new ImageLimitError({ kind: 'input-pixels', ...size, frames, pixels, limit });
  }
}

/**
 * Throws ImageLimitError when any step of the resize chain would hold more pixels than the
 * budget, or the final size (the input's when there is no resize) does not fit the output
 * format. Checked before decoding, so an oversized result costs nothing.
 */
export function assertOutputWithinLimits(
  input: Dimensions,
  steps: readonly Dimensions[],
  frames: number,
  limit: number,
  format: ImageFormat,
): void {
  for (const step of steps) {
    const pixels = step.width * step.height * frames;
    if (pixels > limit) {
      throw new ImageLimitError({ kind: 'output-pixels', ...step, frames, pixels, limit });
    }
  }
  const final = steps.at(-1) ?? input;
  const maxDimension = MAX_DIMENSION_BY_FORMAT[format];
  if (maxDimension !== undefined && Math.max(final.width, final.height) > maxDimension) {
    throw new ImageLimitError({ kind: 'format-dimensions', format, ...final, maxDimension });
  }
}
