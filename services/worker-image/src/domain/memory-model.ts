import type { EncodeSettings } from './encode-settings';
import { ImageLimitError } from './errors';
import type { InputFormat } from './image-limits';
import type { ResizeParams } from './operations';
import type { Dimensions } from './resize-geometry';

/**
 * How much memory an image job needs, worked out before any pixel is decoded, so a worker can
 * keep its jobs inside a fixed budget instead of finding its limit through the OOM killer.
 *
 * libvips streams most work in small strips, but some stages hold the whole image:
 * - decoders of progressive JPEG (every DCT coefficient), interlaced PNG and WebP (the whole
 *   frame), and libvips' own `.v` intermediates (memory-mapped, so they count towards RSS);
 * - a smart crop (attention, entropy), which analyses the whole resized image;
 * - most encoders: WebP (an RGBA frame plus libwebp's YUV picture, at method 3+ also every
 *   token of the image, with sharp YUV an extra float copy), AVIF (libaom's frame buffers and
 *   lookahead), PNG with a palette (libimagequant), and JPEG with progressive scans or
 *   optimised Huffman tables (every coefficient). Baseline JPEG without optimised tables and
 *   truecolour PNG stream.
 *
 * Costs are bytes per pixel of peak RSS above an idle worker (the slope between a 12 and a
 * 48 MP image, so fixed start-up costs do not inflate them), measured on photos with sensor
 * noise at JPEG quality 98 (the worst realistic content: noise keeps the most tokens and the
 * largest output) by `scripts/measure/image-memory.ts`, which prints these figures beside
 * fresh measurements; each is the larger of two such photos' figures, rounded up by ~5 %.
 * They grow with quality because the encoded output (kept in memory until written) and
 * libwebp's token buffer grow with it.
 */

export type DecoderMemoryClass =
  | 'jpeg'
  | 'jpeg-progressive'
  | 'png'
  | 'png-interlaced'
  | 'webp'
  | 'vips';

export type EncoderMemoryClass =
  | 'webp-single-pass'
  | 'webp-multi-pass'
  | 'webp-sharp-yuv'
  | 'webp-lossless'
  | 'avif'
  | 'jpeg-baseline'
  | 'jpeg-optimised'
  | 'jpeg-progressive'
  | 'png'
  | 'png-palette';

/** [quality, bytes per pixel] points, by rising quality; linear in between, flat outside. */
export type QualityCurve = readonly (readonly [quality: number, bytesPerPixel: number])[];

/**
 * Extra bytes per pixel a decoder holds compared with a baseline JPEG, whose strip-by-strip
 * decode is already part of every encoder figure below.
 */
export const DECODER_BYTES_PER_PIXEL: Readonly<Record<DecoderMemoryClass, number>> = {
  jpeg: 0,
  'jpeg-progressive': 3.2,
  png: 0,
  'png-interlaced': 2.5,
  webp: 7.9,
  vips: 0.5,
};

/**
 * Peak bytes per output pixel while encoding (with a baseline JPEG decode feeding it). JPEG
 * and AVIF step up at quality 90, where chroma keeps full resolution (FULL_CHROMA_FROM_QUALITY)
 * and JPEG buffers twice the coefficients; WebP at 90 and up uses sharp YUV (its own class).
 */
export const ENCODER_BYTES_PER_PIXEL: Readonly<Record<EncoderMemoryClass, QualityCurve>> = {
  'webp-single-pass': [
    [50, 5.8],
    [75, 5.9],
    [90, 6.3],
    [100, 7.9],
  ],
  'webp-multi-pass': [
    [50, 7.6],
    [75, 8.8],
    [90, 10.9],
    [100, 15.1],
  ],
  'webp-sharp-yuv': [
    [90, 17.5],
    [100, 20.7],
  ],
  // libwebp lossless (auto's candidate for graphics) keeps the ARGB picture, its transformed
  // copy, hash chains and backward references.
  'webp-lossless': [[100, 33]],
  avif: [
    [50, 30],
    [100, 36],
  ],
  'jpeg-baseline': [[100, 1.1]],
  'jpeg-optimised': [
    [89, 7.5],
    [90, 13.6],
  ],
  'jpeg-progressive': [
    [50, 7.2],
    [89, 10.2],
    [90, 17],
    [100, 19.7],
  ],
  png: [[100, 1.1]],
  'png-palette': [[100, 5.9]],
};

/** Encoders with a large fixed cost whatever the size: libaom's encoder state and lookahead. */
export const ENCODER_FIXED_BYTES: Readonly<Partial<Record<EncoderMemoryClass, number>>> = {
  avif: 64 * 1024 * 1024,
};

/** libvips' per-thread strip buffers and the worker's own per-job allocations. */
export const JOB_OVERHEAD_BYTES = 16 * 1024 * 1024;

/** A smart crop holds the scaled image (3 bands) and its analysis planes. */
export const SMART_CROP_BYTES_PER_PIXEL = 4;

export function decoderMemoryClass(
  format: InputFormat | 'vips',
  progressive: boolean,
): DecoderMemoryClass {
  if (format === 'jpeg') return progressive ? 'jpeg-progressive' : 'jpeg';
  if (format === 'png') return progressive ? 'png-interlaced' : 'png';
  return format;
}

/** libwebp keeps every token of the image from method 3 up, to size its partitions. */
const WEBP_MULTI_PASS_FROM_METHOD = 3;

export function encoderMemoryClass(settings: EncodeSettings): EncoderMemoryClass {
  switch (settings.format) {
    case 'webp':
      if (settings.options.lossless) return 'webp-lossless';
      if (settings.options.smartSubsample) return 'webp-sharp-yuv';
      return settings.options.effort >= WEBP_MULTI_PASS_FROM_METHOD
        ? 'webp-multi-pass'
        : 'webp-single-pass';
    case 'avif':
      return 'avif';
    case 'jpeg': {
      const { mozjpeg, progressive, optimiseScans, optimiseCoding } = settings.options;
      if (mozjpeg || progressive || optimiseScans) return 'jpeg-progressive';
      return optimiseCoding ? 'jpeg-optimised' : 'jpeg-baseline';
    }
    case 'png':
      return settings.options.palette ? 'png-palette' : 'png';
  }
}

/** The codec-level quality the encoder runs at; lossless PNG counts as 100. */
function codecQuality(settings: EncodeSettings): number {
  return 'quality' in settings.options ? settings.options.quality : 100;
}

export function bytesPerPixelAt(curve: QualityCurve, quality: number): number {
  const first = curve[0];
  if (!first) throw new RangeError('a quality curve needs at least one point');
  let previous = first;
  if (quality <= previous[0]) return previous[1];
  for (const point of curve.slice(1)) {
    if (quality <= point[0]) {
      const share = (quality - previous[0]) / (point[0] - previous[0]);
      return previous[1] + share * (point[1] - previous[1]);
    }
    previous = point;
  }
  return previous[1];
}

export function encoderBytes(settings: EncodeSettings, outputPixels: number): number {
  const memoryClass = encoderMemoryClass(settings);
  const perPixel = bytesPerPixelAt(ENCODER_BYTES_PER_PIXEL[memoryClass], codecQuality(settings));
  return Math.ceil((ENCODER_FIXED_BYTES[memoryClass] ?? 0) + perPixel * outputPixels);
}

/** One libvips pass: a decode (the original or a `.v` intermediate) and what it holds. */
export interface PassDemand {
  decoder: DecoderMemoryClass;
  /** Pixels the decoder reads: one frame × frames. */
  inputPixels: number;
  /** Pixels of a resize result held whole for a smart crop; 0 when there is none. */
  heldPixels: number;
}

export interface ImageMemoryDemand {
  /** Every pass of the chain, in order; the encoder runs during the last one. */
  passes: readonly PassDemand[];
  /** Pixels the encoder receives: one output frame × frames. */
  outputPixels: number;
  width: number;
  height: number;
}

/**
 * libvips' smart crop (attention, entropy) scores the whole image scaled to cover the box
 * before it cuts the box out, so that scaled image is held whole; a centre crop streams.
 */
export function smartCropHeldPixels(input: Dimensions, params: ResizeParams): number {
  const { width, height, fit, position } = params;
  if (fit !== 'cover' || position === 'centre' || width === undefined || height === undefined) {
    return 0;
  }
  const shrink = Math.min(input.width / width, input.height / height);
  return Math.ceil(input.width / shrink) * Math.ceil(input.height / shrink);
}

/**
 * The demand of a chain with `resizes` (each producing the matching entry of `steps`) on an
 * input of `input` per frame: the first pass decodes the original, later passes a `.v` file.
 */
export function imageMemoryDemand(options: {
  decoder: DecoderMemoryClass;
  input: Dimensions;
  frames: number;
  resizes: readonly ResizeParams[];
  steps: readonly Dimensions[];
}): ImageMemoryDemand {
  const { decoder, input, frames, resizes, steps } = options;
  const pixels = (size: Dimensions) => size.width * size.height * frames;
  const passCount = Math.max(1, resizes.length);
  const passes: PassDemand[] = [];
  for (let index = 0; index < passCount; index++) {
    const source = index === 0 ? input : (steps[index - 1] ?? input);
    const resize = resizes[index];
    passes.push({
      decoder: index === 0 ? decoder : 'vips',
      inputPixels: pixels(source),
      heldPixels: resize ? smartCropHeldPixels(source, resize) * frames : 0,
    });
  }
  const output = steps.at(-1) ?? input;
  return { passes, outputPixels: pixels(output), ...output };
}

function passBytes(pass: PassDemand): number {
  return Math.ceil(
    DECODER_BYTES_PER_PIXEL[pass.decoder] * pass.inputPixels +
      SMART_CROP_BYTES_PER_PIXEL * pass.heldPixels,
  );
}

/** Peak bytes of the whole job: the largest pass, the last one with its encoder. */
export function estimateImageMemory(demand: ImageMemoryDemand, settings: EncodeSettings): number {
  const last = demand.passes.length - 1;
  const peak = Math.max(
    ...demand.passes.map(
      (pass, index) =>
        passBytes(pass) + (index === last ? encoderBytes(settings, demand.outputPixels) : 0),
    ),
  );
  return JOB_OVERHEAD_BYTES + peak;
}

/**
 * The requested settings, then cheaper ways to write the same format, in the order they are
 * tried. Each step trades a little file size (or, for WebP at quality 90 and up, chroma
 * precision) for memory; none changes the format, the quality setting or the pixels' size.
 * - WebP: without sharp YUV, then libwebp method 2 (one pass, no token buffer; ~3 % larger).
 * - JPEG: baseline with optimised Huffman tables, then baseline with standard tables (~12 %
 *   larger than mozjpeg's progressive file).
 * AVIF and palette PNG have no cheaper mode of the same format; truecolour PNG streams.
 */
export function cheaperEncodeSettings(settings: EncodeSettings): EncodeSettings[] {
  const variants: EncodeSettings[] = [settings];
  switch (settings.format) {
    case 'webp': {
      let options = settings.options;
      if (options.smartSubsample) {
        options = { ...options, smartSubsample: false };
        variants.push({ format: 'webp', options });
      }
      if (options.effort >= WEBP_MULTI_PASS_FROM_METHOD) {
        variants.push({
          format: 'webp',
          options: { ...options, effort: WEBP_MULTI_PASS_FROM_METHOD - 1 },
        });
      }
      return variants;
    }
    case 'jpeg': {
      const baseline = {
        ...settings.options,
        mozjpeg: false,
        progressive: false,
        trellisQuantisation: false,
        optimiseScans: false,
      };
      if (encoderMemoryClass(settings) === 'jpeg-progressive') {
        variants.push({ format: 'jpeg', options: { ...baseline, optimiseCoding: true } });
      }
      if (encoderMemoryClass(settings) !== 'jpeg-baseline') {
        variants.push({ format: 'jpeg', options: { ...baseline, optimiseCoding: false } });
      }
      return variants;
    }
    default:
      return variants;
  }
}

export interface ImageMemoryPlan {
  settings: EncodeSettings;
  estimatedBytes: number;
  /** Whether cheaper settings than the requested ones were chosen to fit the budget. */
  steppedDown: boolean;
}

/**
 * The first of `cheaperEncodeSettings` whose estimate fits `budgetBytes`. When none fits, the
 * job cannot run on this worker at all: ImageLimitError (permanent, so no retries) says how
 * much it needs and what would make it fit.
 */
export function planWithinMemory(
  demand: ImageMemoryDemand,
  settings: EncodeSettings,
  budgetBytes: number,
): ImageMemoryPlan {
  const variants = cheaperEncodeSettings(settings);
  const estimates = variants.map((variant) => estimateImageMemory(demand, variant));
  const index = estimates.findIndex((bytes) => bytes <= budgetBytes);
  if (index === -1) {
    throw new ImageLimitError({
      kind: 'memory',
      format: settings.format,
      width: demand.width,
      height: demand.height,
      neededBytes: Math.min(...estimates),
      budgetBytes,
    });
  }
  return {
    settings: variants[index]!,
    estimatedBytes: estimates[index]!,
    steppedDown: index > 0,
  };
}

/**
 * A search (auto or an ssim target) holds the sample's pixels, their luma and the SSIM sums
 * (Float64 summed-area tables) of the reference and of the candidate being scored, besides
 * the encoders: ~56 bytes per sample pixel, 23 MiB for the largest sample.
 */
export const SEARCH_SAMPLE_BYTES_PER_PIXEL = 56;

export interface SearchMemoryPlan<Candidate> {
  /** Reserved for the whole job: its most demanding candidate, or the reference pass. */
  estimatedBytes: number;
  /** The candidates that fit the budget, each with the settings it is planned at. */
  fitting: { candidate: Candidate; plan: ImageMemoryPlan }[];
  /** The candidates that cannot fit even in their leanest mode: skipped, not failed. */
  skipped: Candidate[];
}

/**
 * The memory plan of a search job. It first writes the reference (the chain's passes into an
 * uncompressed `.v` file, which streams like truecolour PNG), then encodes from that file: each
 * candidate at the top of its search range (memory grows with quality) is planned as a fixed
 * job would be, leaner modes included. A candidate that cannot fit is skipped; when none fits
 * the job fails as a fixed one would (ImageLimitError, kind memory). The reservation covers the
 * most demanding fitting candidate plus the sample's buffers, so every encode of the search
 * stays within it (planWithinMemory against the reservation at a lower quality always fits).
 */
export function planSearchWithinMemory<Candidate>(options: {
  chain: ImageMemoryDemand;
  candidates: readonly { candidate: Candidate; settings: EncodeSettings }[];
  samplePixels: number;
  budgetBytes: number;
}): SearchMemoryPlan<Candidate> {
  const { chain, candidates, samplePixels, budgetBytes } = options;
  const sampleBytes = Math.ceil(SEARCH_SAMPLE_BYTES_PER_PIXEL * samplePixels);
  const streamingWrite: EncodeSettings = {
    format: 'png',
    options: { palette: false, compressionLevel: 6, adaptiveFiltering: false },
  };
  const referenceBytes = estimateImageMemory(chain, streamingWrite);
  const fromReference = referenceEncodeDemand(chain);
  if (referenceBytes + sampleBytes > budgetBytes) {
    throw new ImageLimitError({
      kind: 'memory',
      format: candidates[0]?.settings.format ?? 'png',
      width: chain.width,
      height: chain.height,
      neededBytes: referenceBytes + sampleBytes,
      budgetBytes,
    });
  }
  const fitting: SearchMemoryPlan<Candidate>['fitting'] = [];
  const skipped: Candidate[] = [];
  let firstError: unknown;
  for (const { candidate, settings } of candidates) {
    try {
      fitting.push({
        candidate,
        plan: planWithinMemory(fromReference, settings, budgetBytes - sampleBytes),
      });
    } catch (error) {
      firstError ??= error;
      skipped.push(candidate);
    }
  }
  if (fitting.length === 0) throw firstError;
  const encoderPeak = Math.max(...fitting.map(({ plan }) => plan.estimatedBytes));
  return {
    estimatedBytes: Math.max(referenceBytes, encoderPeak) + sampleBytes,
    fitting,
    skipped,
  };
}

/** Encoding the output from its `.v` reference: one pass that maps the reference and encodes. */
export function referenceEncodeDemand(chain: ImageMemoryDemand): ImageMemoryDemand {
  return {
    ...chain,
    passes: [{ decoder: 'vips', inputPixels: chain.outputPixels, heldPixels: 0 }],
  };
}
