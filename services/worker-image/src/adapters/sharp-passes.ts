import { mkdtemp, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ImageFormat } from '@tamp/proto';
import sharp, { type ResizeOptions, type Sharp, type SharpOptions } from 'sharp';
import type { EncodeSettings } from '../domain/encode-settings';
import type { ResizeParams } from '../domain/operations';

/**
 * The libvips passes every image job runs: open (orientation, frames, colour profile), the
 * resize chain, and the final encode. processImage writes the output with them; an auto or
 * target-quality job writes its reference (the resized pixels) with them and encodes from it.
 */

// A truncated or corrupt file must fail rather than produce a half-grey image, but benign
// libjpeg warnings (e.g. extraneous bytes before a marker) on images browsers show fine must not.
export const FAIL_ON = 'error' as const;

export const TRANSPARENT = { r: 0, g: 0, b: 0, alpha: 0 };
export const WHITE = { r: 255, g: 255, b: 255, alpha: 1 };

/** Everything a pass needs to know about the job beyond its own resize. */
export interface PassContext {
  /** Frames carried through the pipeline: >1 only for animated WebP in and out. */
  frames: number;
  keepIccProfile: boolean;
  /** The output format; `auto` while it is not chosen yet (letterboxing stays transparent). */
  format: ImageFormat | 'auto';
  limitInputPixels: number;
}

/**
 * sharp applies one resize per pipeline, so a chain of n resizes runs as n passes. The passes
 * in between write libvips' native `.v` format: uncompressed (no encode cost, no generation
 * loss) and it keeps frames, frame delays and the ICC profile. They live in a private folder
 * next to the output (same volume as the job's scratch space) and are removed afterwards.
 * `finish` turns the last pass into what is written (an encode; nothing for a `.v` reference).
 */
export async function runPasses(
  inputPath: string,
  outputPath: string,
  resizes: readonly ResizeParams[],
  finish: (image: Sharp) => Sharp,
  context: PassContext,
): Promise<sharp.OutputInfo> {
  if (resizes.length <= 1) {
    return finish(applyResize(openSource(inputPath, true, context), resizes[0], context)).toFile(
      outputPath,
    );
  }
  const scratch = await mkdtemp(join(dirname(outputPath), '.image-passes-'));
  try {
    let source = inputPath;
    for (const [index, resize] of resizes.slice(0, -1).entries()) {
      const target = join(scratch, `pass-${index}.v`);
      await applyResize(openSource(source, index === 0, context), resize, context).toFile(target);
      source = target;
    }
    return await finish(
      applyResize(openSource(source, false, context), resizes.at(-1), context),
    ).toFile(outputPath);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Opens the original (turned upright first of all) or an upright `.v` intermediate. */
export function openSource(path: string, isOriginal: boolean, context: PassContext): Sharp {
  const options: SharpOptions = {
    failOn: FAIL_ON,
    limitInputPixels: context.limitInputPixels,
    // Intermediate passes are already upright; the original is turned first of all.
    autoOrient: isOriginal,
  };
  if (context.frames > 1) options.animated = true;
  const image = sharp(path, options);
  // Without this sharp converts to sRGB and drops the profile (the default we want otherwise).
  return context.keepIccProfile ? image.keepIccProfile() : image;
}

function applyResize(image: Sharp, resize: ResizeParams | undefined, context: PassContext): Sharp {
  return resize ? image.resize(sharpResizeOptions(resize, context)) : image;
}

function sharpResizeOptions(params: ResizeParams, context: PassContext): ResizeOptions {
  return {
    width: params.width,
    height: params.height,
    fit: params.fit,
    // libvips' smart crop works on one frame; animated images are cropped around the centre.
    position: context.frames > 1 ? 'centre' : params.position,
    withoutEnlargement: params.fit === 'inside',
    // Letterboxing is transparent where the format has alpha; JPEG has none, so white.
    background: context.format === 'jpeg' ? WHITE : TRANSPARENT,
  };
}

/** The encode of `settings` at the end of a pipeline. */
export function encodeWith(image: Sharp, settings: EncodeSettings): Sharp {
  switch (settings.format) {
    case 'webp':
      return image.webp(settings.options);
    case 'avif':
      return image.avif(settings.options);
    case 'jpeg':
      // JPEG has no alpha: composite transparent areas onto white rather than the black that
      // hides under them.
      return image.flatten({ background: WHITE }).jpeg(settings.options);
    case 'png':
      return image.png(settings.options);
  }
}

/** What a written image is: one frame's size, its frames and its bytes. */
export interface WrittenImage {
  width: number;
  height: number;
  pages: number;
  size: number;
}

export function writtenImage(info: sharp.OutputInfo): WrittenImage {
  return {
    width: info.width,
    height: info.pageHeight ?? info.height,
    pages: info.pages ?? 1,
    size: info.size,
  };
}
