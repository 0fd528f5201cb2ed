/**
 * SSIM (Wang, Bovik, Sheikh and Simoncelli, 2004) on 8-bit luma, the perceptual score that
 * `auto` and `ssim` targets search against.
 *
 * Written here rather than taken from ssim.js (MIT, the most used npm implementation), which
 * the tests keep as the reference it must agree with (ssim.test.ts): measured on this worker's
 * 2-core machine, ssim.js takes ~0.6 µs per pixel per comparison and holds plain JS arrays of
 * ~50 bytes per pixel, and it recomputes the reference's sums on every call. A search compares
 * one reference with up to ~20 encodings, so this keeps the reference's sums (`SsimReference`)
 * and works in typed arrays: ~15 ms per comparison of a 0.4 MP sample, ~40 bytes per pixel.
 *
 * Definition, as ssim.js's default (`weber`) variant: 11×11 uniform windows at every position
 * inside the image, K1 = 0.01, K2 = 0.03, L = 255, the mean of the local SSIM map. Luma is
 * BT.601 in integers, `(77 R + 150 G + 29 B + 128) >> 8`, composited onto white first
 * (`lumaOnWhite`): transparent areas count as what a white page shows, which is also how
 * a JPEG candidate (no alpha) is written.
 */

export const SSIM_WINDOW = 11;
const C1 = (0.01 * 255) ** 2;
const C2 = (0.03 * 255) ** 2;

/** A luma plane: one byte per pixel, rows top to bottom. */
export interface LumaPlane {
  data: Uint8Array;
  width: number;
  height: number;
}

/**
 * Luma of raw interleaved 8-bit pixels (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA channels),
 * composited onto white.
 */
export function lumaOnWhite(
  pixels: Uint8Array,
  width: number,
  height: number,
  channels: number,
): LumaPlane {
  const count = width * height;
  if (pixels.length < count * channels) {
    throw new RangeError(`${pixels.length} bytes cannot hold ${width}×${height}×${channels}`);
  }
  const data = new Uint8Array(count);
  for (let index = 0, offset = 0; index < count; index++, offset += channels) {
    let luma: number;
    let alpha = 255;
    if (channels <= 2) {
      luma = pixels[offset]!;
      if (channels === 2) alpha = pixels[offset + 1]!;
    } else {
      luma =
        (77 * pixels[offset]! + 150 * pixels[offset + 1]! + 29 * pixels[offset + 2]! + 128) >> 8;
      if (channels === 4) alpha = pixels[offset + 3]!;
    }
    data[index] = alpha === 255 ? luma : Math.round((luma * alpha + 255 * (255 - alpha)) / 255);
  }
  return { data, width, height };
}

/**
 * Summed-area tables (one leading row and column of zeros) of a, a², and a·b when `b` is given,
 * built in one pass.
 */
function integrals(
  a: Uint8Array,
  width: number,
  height: number,
  b?: Uint8Array,
): { sum: Float64Array; squares: Float64Array; products?: Float64Array } {
  const stride = width + 1;
  const size = stride * (height + 1);
  const sum = new Float64Array(size);
  const squares = new Float64Array(size);
  const products = b === undefined ? undefined : new Float64Array(size);
  for (let y = 0; y < height; y++) {
    let rowSum = 0;
    let rowSquares = 0;
    let rowProducts = 0;
    const above = y * stride + 1;
    const here = above + stride;
    for (let x = 0; x < width; x++) {
      const value = a[y * width + x]!;
      rowSum += value;
      rowSquares += value * value;
      sum[here + x] = sum[above + x]! + rowSum;
      squares[here + x] = squares[above + x]! + rowSquares;
      if (products !== undefined) {
        rowProducts += value * b![y * width + x]!;
        products[here + x] = products[above + x]! + rowProducts;
      }
    }
  }
  return products === undefined ? { sum, squares } : { sum, squares, products };
}

/** The reference side of a comparison, its window sums kept for every candidate. */
export class SsimReference {
  readonly width: number;
  readonly height: number;
  readonly #luma: Uint8Array;
  readonly #sum: Float64Array;
  readonly #sumOfSquares: Float64Array;

  constructor(reference: LumaPlane) {
    if (reference.width < SSIM_WINDOW || reference.height < SSIM_WINDOW) {
      throw new RangeError(
        `SSIM needs at least ${SSIM_WINDOW}×${SSIM_WINDOW} pixels, got ${reference.width}×${reference.height}`,
      );
    }
    this.width = reference.width;
    this.height = reference.height;
    this.#luma = reference.data;
    const tables = integrals(reference.data, this.width, this.height);
    this.#sum = tables.sum;
    this.#sumOfSquares = tables.squares;
  }

  /** Mean SSIM of `candidate` (same size) against the reference: 1 when identical. */
  compare(candidate: LumaPlane): number {
    const { width, height } = this;
    if (candidate.width !== width || candidate.height !== height) {
      throw new RangeError(
        `SSIM compares images of one size: ${width}×${height} and ${candidate.width}×${candidate.height}`,
      );
    }
    const tables = integrals(candidate.data, width, height, this.#luma);
    const sumX = this.#sum;
    const squaresX = this.#sumOfSquares;
    const { sum: sumY, squares: squaresY } = tables;
    const products = tables.products!;
    const stride = width + 1;
    const n = SSIM_WINDOW * SSIM_WINDOW;
    // The four corners of the window whose top-left pixel is (x, y), as offsets into a table.
    const below = SSIM_WINDOW * stride;
    const windowSum = (table: Float64Array, corner: number) =>
      table[corner + below + SSIM_WINDOW]! -
      table[corner + SSIM_WINDOW]! -
      table[corner + below]! +
      table[corner]!;
    let total = 0;
    const columns = width - SSIM_WINDOW + 1;
    const rows = height - SSIM_WINDOW + 1;
    for (let y = 0; y < rows; y++) {
      for (let x = 0; x < columns; x++) {
        const corner = y * stride + x;
        const meanX = windowSum(sumX, corner) / n;
        const meanY = windowSum(sumY, corner) / n;
        const varianceX = windowSum(squaresX, corner) / n - meanX * meanX;
        const varianceY = windowSum(squaresY, corner) / n - meanY * meanY;
        const covariance = windowSum(products, corner) / n - meanX * meanY;
        total +=
          ((2 * meanX * meanY + C1) * (2 * covariance + C2)) /
          ((meanX * meanX + meanY * meanY + C1) * (varianceX + varianceY + C2));
      }
    }
    return total / (columns * rows);
  }
}

/** Mean SSIM of two luma planes of one size. */
export function ssim(reference: LumaPlane, candidate: LumaPlane): number {
  return new SsimReference(reference).compare(candidate);
}
