import { rm, stat } from 'node:fs/promises';
import { inSpan, keepInputWhenNotSmaller } from '@tamp/kit';
import {
  AUTO_IMAGE_FORMAT,
  IMAGE_EXTENSIONS,
  type ImageCandidate,
  type ImageFormat,
  type ImageOperation,
  LIMITS,
} from '@tamp/proto';
import sharp from 'sharp';
import { acceptedFormats, type CandidateSpec, candidatesFor } from '../domain/auto-encode';
import { encodeSettingsFor } from '../domain/encode-settings';
import { ImageDecodeError, ImageLimitError } from '../domain/errors';
import {
  assertInputWithinBudget,
  assertOutputWithinLimits,
  fitsFormatDimensions,
  type InputFormat,
  isInputFormat,
} from '../domain/image-limits';
import type { MemoryBudget } from '../domain/memory-budget';
import {
  decoderMemoryClass,
  type ImageMemoryDemand,
  imageMemoryDemand,
  planSearchWithinMemory,
  planWithinMemory,
} from '../domain/memory-model';
import { type EncodeParams, planOperations, type ResizeParams } from '../domain/operations';
import { type Dimensions, planResizeChain } from '../domain/resize-geometry';
import { planSample } from '../domain/search-sample';
import { candidateKey, candidateSettings, searchAndEncode, searchSampleBytes } from './auto-encode';
import {
  encodeWith,
  FAIL_ON,
  type PassContext,
  runPasses,
  type WrittenImage,
  writtenImage,
} from './sharp-passes';

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
  /** What an auto or target-quality search may spend; default LIMITS.imageSearchBudgetMs. */
  searchBudgetMs?: number;
  /** The search's clock, in milliseconds; default performance.now. */
  now?: () => number;
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
  /** The output is the input's own bytes: nothing smaller was found (never larger). */
  keptInput?: true;
  /** Auto or an ssim target: the target, the output's score, and each encoding weighed. */
  ssimTarget?: number;
  ssim?: number;
  candidates?: ImageCandidate[];
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
  /** It carries what the pipeline strips or converts: EXIF, XMP, IPTC, a non-sRGB profile. */
  hasStrippedMetadata: boolean;
}

// Colour spaces whose embedded ICC profile can describe the output pixels. A CMYK (or grey)
// profile cannot tag sRGB output, so those inputs are converted to sRGB through their profile.
const ICC_KEEPING_SPACES = new Set(['srgb', 'rgb', 'rgb16']);

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
export function processImage(input: ProcessImageInput): Promise<ImageResult> {
  return inSpan('sharp process', {}, async (span) => {
    const result = await processImageInSpan(input);
    span.setAttributes({
      'image.format': result.format,
      'image.megapixels_in': result.megapixelsIn,
      'image.pages': result.pages,
      'image.estimated_memory_bytes': result.estimatedMemoryBytes,
      'image.encoder_stepped_down': result.encoderSteppedDown,
    });
    return result;
  });
}

async function processImageInSpan(input: ProcessImageInput): Promise<ImageResult> {
  const { inputPath, outputPath, limitInputPixels } = input;
  if (!Number.isSafeInteger(limitInputPixels) || limitInputPixels <= 0) {
    throw new RangeError(`limitInputPixels must be a positive integer, got ${limitInputPixels}`);
  }
  const plan = planOperations(input.operations);
  const searching = plan.encode.format === AUTO_IMAGE_FORMAT || plan.encode.ssim !== undefined;
  const accepted = acceptedFormats(plan.encode);

  const inputSize = (await stat(inputPath)).size;
  const probe = await inSpan('sharp probe', {}, () => probeInput(inputPath));
  const frames = framesToKeep(probe, accepted.includes('webp'));
  assertInputWithinBudget(probe.oriented, frames, limitInputPixels);
  const steps = planResizeChain(probe.oriented, plan.resizes);
  const final = steps.at(-1) ?? probe.oriented;
  // auto: the job fails for size only when no accepted format can hold the output.
  const limitingFormat =
    accepted.find((format) => fitsFormatDimensions(format, final)) ?? accepted[0]!;
  assertOutputWithinLimits(probe.oriented, steps, frames, limitInputPixels, limitingFormat);
  const demand = imageMemoryDemand({
    decoder: decoderMemoryClass(probe.format, probe.progressive),
    input: probe.oriented,
    frames,
    resizes: plan.resizes,
    steps,
  });
  const context: PassContext = {
    frames,
    keepIccProfile: probe.keepIccProfile,
    format: plan.encode.format,
    limitInputPixels,
  };

  const job: Job = {
    input,
    resizes: plan.resizes,
    encode: plan.encode,
    context,
    demand,
    translate: (error) => translateSharpError(error, probe, frames, limitInputPixels),
  };
  const encoded = searching ? await searchWithinMemory(job) : await encodeWithinMemory(job);
  const { info } = encoded;

  const result: ImageResult = {
    format: encoded.format,
    extension: IMAGE_EXTENSIONS[encoded.format],
    widthIn: probe.oriented.width,
    heightIn: probe.oriented.height,
    widthOut: info.width,
    heightOut: info.height,
    pages: info.pages,
    inputSize,
    outputSize: info.size,
    megapixelsIn: (probe.oriented.width * probe.oriented.height) / 1e6,
    estimatedMemoryBytes: encoded.estimatedBytes,
    encoderSteppedDown: encoded.steppedDown,
    ...encoded.search,
  };
  // Never larger (docs/decisions.md#never-larger-than-the-input): maybe the input is the result.
  const kept = await keepInputWhenNotSmaller<ImageFormat>(
    { inputPath, outputPath },
    {
      inputFormat: probe.format,
      inputSize,
      outputSize: info.size,
      accepted,
      sameContent:
        info.width === probe.oriented.width &&
        info.height === probe.oriented.height &&
        info.pages === probe.pages,
      inputNeedsRewrite: probe.orientation !== 1 || probe.hasStrippedMetadata,
    },
  );
  if (kept === null) return result;
  return { ...result, ...kept, extension: IMAGE_EXTENSIONS[kept.format] };
}

/** A job once planned: what both ways of encoding it need. */
interface Job {
  input: ProcessImageInput;
  resizes: readonly ResizeParams[];
  encode: EncodeParams;
  context: PassContext;
  demand: ImageMemoryDemand;
  /** sharp's error as the API's (ImageLimitError, ImageDecodeError) where it is one. */
  translate: (error: unknown) => unknown;
}

interface Encoded {
  format: ImageFormat;
  info: WrittenImage;
  estimatedBytes: number;
  steppedDown: boolean;
  search?: Pick<ImageResult, 'ssim' | 'ssimTarget' | 'candidates'>;
}

/** A fixed format at a fixed quality: one encode, in the leanest mode the budget needs. */
async function encodeWithinMemory(job: Job): Promise<Encoded> {
  const { input, resizes, encode, context, demand } = job;
  const format = encode.format as ImageFormat;
  const { settings, estimatedBytes, steppedDown } = planWithinMemory(
    demand,
    encodeSettingsFor({ format, quality: encode.quality, effort: encode.effort }),
    input.memory.totalBytes,
  );
  const info = await withMemory(job, estimatedBytes, () =>
    inSpan('sharp encode', { attributes: { 'image.passes': Math.max(1, resizes.length) } }, () =>
      runPasses(
        input.inputPath,
        input.outputPath,
        resizes,
        (image) => encodeWith(image, settings),
        context,
      ),
    ),
  );
  return {
    format,
    info: writtenImage(info),
    estimatedBytes,
    steppedDown,
  };
}

/**
 * auto or an ssim target: every encoding the job may weigh is planned against the memory
 * budget before anything is decoded (those that cannot fit are skipped, not failed), the job
 * reserves for the most demanding one, and the search runs inside that reservation.
 */
async function searchWithinMemory(job: Job): Promise<Encoded> {
  const { input, resizes, encode, context, demand } = job;
  // The traits that decide the candidates are read from the pixels: plan for every one that
  // might be weighed (lossless too), with transparency and many colours assumed.
  const possible = [
    ...new Map(
      [true, false].flatMap((graphic) =>
        candidatesForMemory(encode, graphic).map((spec) => [candidateKey(spec), spec] as const),
      ),
    ).values(),
  ];
  const sample = planSample(demand.width, demand.height);
  const memoryPlan = planSearchWithinMemory({
    chain: demand,
    candidates: possible.map((candidate) => ({
      candidate,
      settings: candidateSettings(candidate, encode, false),
    })),
    samplePixels: sample.width * sample.height,
    budgetBytes: input.memory.totalBytes,
  });
  const estimatedBytes = memoryPlan.estimatedBytes;
  const output = await withMemory(job, estimatedBytes, () =>
    inSpan('image search', {}, () =>
      searchAndEncode({
        inputPath: input.inputPath,
        outputPath: input.outputPath,
        resizes,
        encode,
        context,
        chain: demand,
        memorySkipped: new Set(memoryPlan.skipped.map(candidateKey)),
        encodeBudgetBytes: estimatedBytes - searchSampleBytes(demand.width, demand.height),
        searchBudgetMs: input.searchBudgetMs ?? LIMITS.imageSearchBudgetMs,
        now: input.now ?? (() => performance.now()),
      }),
    ),
  );
  return {
    format: output.format,
    info: output.info,
    estimatedBytes,
    steppedDown: memoryPlan.fitting.some(({ plan }) => plan.steppedDown),
    search: { ssim: output.ssim, ssimTarget: output.ssimTarget, candidates: output.candidates },
  };
}

/** Every candidate auto could weigh for an opaque photo (graphic false) or a graphic (true). */
function candidatesForMemory(encode: EncodeParams, graphic: boolean): CandidateSpec[] {
  return candidatesFor(encode, { transparent: graphic, fewColours: graphic, animated: false });
}

/**
 * Reserves `bytes` of the worker's image memory around `work`; a partial output is removed
 * and sharp's errors are translated for the API when it fails.
 */
async function withMemory<T>(job: Job, bytes: number, work: () => Promise<T>): Promise<T> {
  const { input } = job;
  const releaseMemory = await input.memory.reserve(bytes, input.signal);
  try {
    return await work();
  } catch (error) {
    await rm(input.outputPath, { force: true });
    throw job.translate(error);
  } finally {
    releaseMemory();
  }
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
  const keepIccProfile =
    metadata.hasProfile === true && ICC_KEEPING_SPACES.has(metadata.space ?? '');
  return {
    format: metadata.format,
    progressive: metadata.isProgressive === true,
    oriented: { width, height },
    pages: metadata.pages ?? 1,
    orientation: metadata.orientation ?? 1,
    keepIccProfile,
    hasStrippedMetadata:
      metadata.exif !== undefined ||
      metadata.xmp !== undefined ||
      metadata.iptc !== undefined ||
      (metadata.hasProfile === true && !keepIccProfile),
  };
}

/**
 * Only WebP output can stay animated; for AVIF, JPEG and PNG the first frame is taken (loading
 * all frames would give a tall strip of frames instead). libvips cannot turn multi-frame images
 * by 90°, so an animated WebP whose EXIF orientation needs that is also reduced to its first
 * frame: orientation is applied before anything else. `webpOutput`: the output is or may be
 * (auto accepting it) WebP.
 */
function framesToKeep(probe: InputProbe, webpOutput: boolean): number {
  const needsQuarterTurn = probe.orientation >= 5 && probe.orientation <= 8;
  return webpOutput && probe.pages > 1 && !needsQuarterTurn ? probe.pages : 1;
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
