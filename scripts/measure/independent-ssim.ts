/**
 * SSIM computed by an implementation independent of Tamp's own (services/worker-image/src/domain/
 * ssim.ts): ssim.js, its "weber" variant at full resolution, which is the definition Tamp's
 * follows. Tests and benchmarks score Tamp's lossy outputs with it, so a defect in the worker's
 * measure cannot also hide in the check of it.
 */
import sharp from 'sharp';
import { ssim as ssimJs } from 'ssim.js';

/** RGBA pixels on white, the form every score compares (transparency as a white page shows it). */
export interface Pixels {
  data: Uint8ClampedArray;
  width: number;
  height: number;
}

export async function pixelsOnWhite(image: sharp.Sharp): Promise<Pixels> {
  const { data, info } = await image
    .flatten({ background: '#ffffff' })
    .ensureAlpha()
    .raw({ depth: 'uchar' })
    .toBuffer({ resolveWithObject: true });
  return {
    data: new Uint8ClampedArray(data.buffer, data.byteOffset, data.length),
    width: info.width,
    height: info.height,
  };
}

/** The mean SSIM of two images of the same size. */
export function independentSsim(reference: Pixels, candidate: Pixels): number {
  if (reference.width !== candidate.width || reference.height !== candidate.height) {
    throw new Error(
      `decoded ${candidate.width}×${candidate.height}, expected ${reference.width}×${reference.height}`,
    );
  }
  return ssimJs(reference, candidate, { ssim: 'weber', downsample: false }).mssim;
}

/** The score of an encoded image against the reference pixels it should show. */
export async function scoreEncoded(reference: Pixels, encoded: Buffer): Promise<number> {
  return independentSsim(
    reference,
    await pixelsOnWhite(sharp(encoded, { limitInputPixels: false })),
  );
}
