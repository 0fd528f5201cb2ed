import { mkdtemp, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { IMAGE_EXTENSIONS, type ImageFormat, type ImageOperation } from '@tamp/proto';
import sharp, { type ResizeOptions, type Sharp, type SharpOptions } from 'sharp';
import { type EncodeSettings, encodeSettingsFor } from '../domain/encode-settings';
import { ImageDecodeError, ImageLimitError } from '../domain/errors';
import {
  assertInputWithinBudget,
  assertOutputWithinLimits,
  type InputFormat,
  isInputFormat,
} from '../domain/image-limits';
import type { MemoryBudget } from '../domain/memory-budget';
import { decoderMemoryClass, imageMemoryDemand, planWithinMemory } from '../domain/memory-model';
import { planOperations, type ResizeParams } from '../domain/operations';
import { type Dimensions, planResizeChain } from '../domain/resize-geometry';

export interface ProcessImageInput {
  inputPath: string;
  outputPath: string;
  /** 0..n resize operations, then exactly one encode. */
  operations: readonly ImageOperation[];
  /** Pixel budget: decoded input (all frames that are kept) and every resize result. */
  limitInputPixels: number;
  /** The worker's image memory, shared by its jobs; this one waits for its estimate. */
  memory: MemoryBudget;
  /** Gives up waiting for memory (inline timeout, shutdown). */
  signal?: AbortSignal;
}

export interface ImageResult {
  format: ImageFormat;
  /** Without the dot: webp, avif, jpg, png. */
  extension: string;
  /** Input size as displayed, i.e. after EXIF orientation; one frame. */
  widthIn: number;
  heightIn: number;
  /** Output size of one frame. */
  widthOut: number;
  heightOut: number;
  /** Frames in the output (1 unless an animated WebP stayed animated). */
  pages: number;
  inputSize: number;
  outputSize: number;
  /** widthIn × heightIn / 1e6, unrounded (usage rounds its totals). */
  megapixelsIn: number;
  /** What the job was estimated to need and reserved from the worker's memory budget. */
  estimatedMemoryBytes: number;
  /** Whether a leaner encoder mode than the requested one was used to fit the budget. */
  encoderSteppedDown: boolean;
}

/** What the header says, read without decoding pixels. */
interface InputProbe {
  format: InputFormat;
  /** Progressive JPEG or interlaced PNG: the decoder holds the whole image. */
  progressive: boolean;
  /** Dimensions of one frame after EXIF orientation. */
  oriented: Dimensions;
  pages: number;
  orientation: number;
  keepIccProfile: boolean;
}

/** Everything a pass needs to know about the job beyond its own resize. */
interface PassContext {
  /** Frames carried through the pipeline: >1 only for animated WebP in and out. */
  frames: number;
  keepIccProfile: boolean;
  format: ImageFormat;
  limitInputPixels: number;
}

// A truncated or corrupt file must fail rather than produce a half-grey image, but benign
// libjpeg warnings (e.g. extraneous bytes before a marker) on images browsers show fine must not.
const FAIL_ON = 'error' as const;

// Colour spaces whose embedded ICC profile can describe the output pixels. A CMYK (or grey)
// profile cannot tag sRGB output, so those inputs are converted to sRGB through their profile.
const ICC_KEEPING_SPACES = new Set(['srgb', 'rgb', 'rgb16']);

const TRANSPARENT = { r: 0, g: 0, b: 0, alpha: 0 };
const WHITE = { r: 255, g: 255, b: 255, alpha: 1 };

/**
 * Runs a resolved image chain from `inputPath` to `outputPath`. sharp reads and writes the
 * files itself (libvips streams them), so the image is never held whole in a JS Buffer.
 *
 * Before decoding, the job's peak memory is estimated from the header (memory-model.ts); it
 * waits until the worker's budget has that much free, and when even the leanest encoder mode
 * of the format cannot fit the whole budget the job fails instead of risking the OOM killer.
 *
 * Failures caused by the image reject with ImageLimitError (too many pixels in or out, too
 * large for the output format or for the memory budget; checked from the header before any
 * pixel is decoded) or
 * ImageDecodeError (corrupt, truncated or not JPEG/PNG/WebP). Anything else (a missing input
 * file, a full disk) rejects with the original error. A partial output file is removed.
 */
export async function processImage(input: ProcessImageInput): Promise<ImageResult> {
  const { inputPath, outputPath, limitInputPixels } = input;
  if (!Number.isSafeInteger(limitInputPixels) || limitInputPixels <= 0) {
    throw new RangeError(`limitInputPixels must be a positive integer, got ${limitInputPixels}`);
  }
  const plan = planOperations(input.operations);

  const inputSize = (await stat(inputPath)).size;
  const probe = await probeInput(inputPath);
  const frames = framesToKeep(probe, plan.encode.format);
  assertInputWithinBudget(probe.oriented, frames, limitInputPixels);
  const steps = planResizeChain(probe.oriented, plan.resizes);
  assertOutputWithinLimits(probe.oriented, steps, frames, limitInputPixels, plan.encode.format);
  const demand = imageMemoryDemand({
    decoder: decoderMemoryClass(probe.format, probe.progressive),
    input: probe.oriented,
    frames,
    resizes: plan.resizes,
    steps,
  });
  const { settings, estimatedBytes, steppedDown } = planWithinMemory(
    demand,
    encodeSettingsFor(plan.encode),
    input.memory.totalBytes,
  );

  const context: PassContext = {
    frames,
    keepIccProfile: probe.keepIccProfile,
    format: plan.encode.format,
    limitInputPixels,
  };
  const releaseMemory = await input.memory.reserve(estimatedBytes, input.signal);
  let info: sharp.OutputInfo;
  try {
    info = await runPasses(inputPath, outputPath, plan.resizes, settings, context);
  } catch (error) {
    await rm(outputPath, { force: true });
    throw translateSharpError(error, probe, frames, limitInputPixels);
  } finally {
    releaseMemory();
  }

  return {
    format: plan.encode.format,
    extension: IMAGE_EXTENSIONS[plan.encode.format],
    widthIn: probe.oriented.width,
    heightIn: probe.oriented.height,
    widthOut: info.width,
    heightOut: info.pageHeight ?? info.height,
    pages: info.pages ?? 1,
    inputSize,
    outputSize: info.size,
    megapixelsIn: (probe.oriented.width * probe.oriented.height) / 1e6,
    estimatedMemoryBytes: estimatedBytes,
    encoderSteppedDown: steppedDown,
  };
}

async function probeInput(inputPath: string): Promise<InputProbe> {
  let metadata: sharp.Metadata;
  try {
    metadata = await sharp(inputPath, { failOn: FAIL_ON, limitInputPixels: false }).metadata();
  } catch (error) {
    throw MISSING_INPUT_MESSAGE.test(messageOf(error)) ? error : toDecodeError(error);
  }
  if (!isInputFormat(metadata.format)) {
    throw new ImageDecodeError(
      'unsupported-format',
      `Unsupported image format ${metadata.format ?? 'unknown'}; expected JPEG, PNG or WebP`,
    );
  }
  const width = metadata.autoOrient?.width ?? metadata.width;
  const height = metadata.autoOrient?.height ?? metadata.height;
  if (!width || !height) {
    throw new ImageDecodeError('corrupt', 'Image header does not give its dimensions');
  }
  return {
    format: metadata.format,
    progressive: metadata.isProgressive === true,
    oriented: { width, height },
    pages: metadata.pages ?? 1,
    orientation: metadata.orientation ?? 1,
    keepIccProfile: metadata.hasProfile === true && ICC_KEEPING_SPACES.has(metadata.space ?? ''),
  };
}

/**
 * Only WebP output can stay animated; for AVIF, JPEG and PNG the first frame is taken (loading
 * all frames would give a tall strip of frames instead). libvips cannot turn multi-frame images
 * by 90°, so an animated WebP whose EXIF orientation needs that is also reduced to its first
 * frame: orientation is applied before anything else.
 */
function framesToKeep(probe: InputProbe, format: ImageFormat): number {
  const needsQuarterTurn = probe.orientation >= 5 && probe.orientation <= 8;
  return format === 'webp' && probe.pages > 1 && !needsQuarterTurn ? probe.pages : 1;
}

/**
 * sharp applies one resize per pipeline, so a chain of n resizes runs as n passes. The passes
 * in between write libvips' native `.v` format: uncompressed (no encode cost, no generation
 * loss) and it keeps frames, frame delays and the ICC profile. They live in a private folder
 * next to the output (same volume as the job's scratch space) and are removed afterwards.
 */
async function runPasses(
  inputPath: string,
  outputPath: string,
  resizes: readonly ResizeParams[],
  settings: EncodeSettings,
  context: PassContext,
): Promise<sharp.OutputInfo> {
  if (resizes.length <= 1) {
    return resizeAndEncode(
      openSource(inputPath, true, context),
      resizes[0],
      settings,
      context,
    ).toFile(outputPath);
  }
  const scratch = await mkdtemp(join(dirname(outputPath), '.image-passes-'));
  try {
    let source = inputPath;
    for (const [index, resize] of resizes.slice(0, -1).entries()) {
      const target = join(scratch, `pass-${index}.v`);
      await applyResize(openSource(source, index === 0, context), resize, context).toFile(target);
      source = target;
    }
    return await resizeAndEncode(
      openSource(source, false, context),
      resizes.at(-1),
      settings,
      context,
    ).toFile(outputPath);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

function openSource(path: string, isOriginal: boolean, context: PassContext): Sharp {
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

function resizeAndEncode(
  image: Sharp,
  resize: ResizeParams | undefined,
  settings: EncodeSettings,
  context: PassContext,
): Sharp {
  const resized = applyResize(image, resize, context);
  switch (settings.format) {
    case 'webp':
      return resized.webp(settings.options);
    case 'avif':
      return resized.avif(settings.options);
    case 'jpeg':
      // JPEG has no alpha: composite transparent areas onto white rather than the black that
      // hides under them.
      return resized.flatten({ background: WHITE }).jpeg(settings.options);
    case 'png':
      return resized.png(settings.options);
  }
}

const PIXEL_LIMIT_MESSAGE = /exceeds pixel limit/i;
const UNSUPPORTED_FORMAT_MESSAGE = /unsupported image format/i;
// libvips names the loader that failed (VipsJpeg, pngload, webpload, vipsload...) or says the
// header is corrupt; write failures name the saver or "write" instead.
const DECODE_FAILURE_MESSAGE =
  /(VipsJpeg|jpegload|pngload|spngload|webpload|vipsload|corrupt|premature end|truncated|unable to parse|read error|Input file|Input buffer)/i;
const WRITE_FAILURE_MESSAGE = /(write|save)/i;
// The file vanished after it was opened: an I/O problem, not a bad image.
const MISSING_INPUT_MESSAGE = /Input file is missing/i;

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function toDecodeError(error: unknown): ImageDecodeError {
  const message = messageOf(error);
  if (UNSUPPORTED_FORMAT_MESSAGE.test(message)) {
    return new ImageDecodeError(
      'unsupported-format',
      'Unsupported image format; expected JPEG, PNG or WebP',
      { cause: error },
    );
  }
  return new ImageDecodeError('corrupt', `Image is corrupt or truncated: ${firstLine(message)}`, {
    cause: error,
  });
}

function firstLine(message: string): string {
  return message.split('\n', 1)[0] ?? message;
}

function translateSharpError(
  error: unknown,
  probe: InputProbe,
  frames: number,
  limit: number,
): unknown {
  const message = messageOf(error);
  if (PIXEL_LIMIT_MESSAGE.test(message)) {
    // The header check above should have caught it; keep the typed error if libvips disagrees.
    const pixels = probe.oriented.width * probe.oriented.height * frames;
    return new ImageLimitError({ kind: 'input-pixels', ...probe.oriented, frames, pixels, limit });
  }
  if (
    DECODE_FAILURE_MESSAGE.test(message) &&
    !WRITE_FAILURE_MESSAGE.test(message) &&
    !MISSING_INPUT_MESSAGE.test(message)
  ) {
    return toDecodeError(error);
  }
  return error;
}
