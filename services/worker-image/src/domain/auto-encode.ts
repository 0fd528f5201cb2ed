import {
  AUTO_IMAGE_FORMAT,
  IMAGE_FORMATS,
  type ImageCandidate,
  type ImageEncodeParams,
  type ImageFormat,
} from '@tamp/proto';

/**
 * The rules of `format: "auto"` and of `ssim` targets (services/worker-image/README.md#auto-and-
 * perceptual-targets): which encodings a job weighs, how the encoder quality is searched, which
 * one wins, when the search stops for time, and when the input itself is the result. The
 * adapter (adapters/auto-encode.ts) runs the encodes and measures; nothing here does I/O.
 */

/** One encoding a job weighs: a format, lossy (its quality searched) or lossless. */
export interface CandidateSpec {
  format: ImageFormat;
  lossless: boolean;
}

/** What the reference pixels say about the image, read once before the search. */
export interface ImageTraits {
  /** Some pixel is not fully opaque. */
  transparent: boolean;
  /** At most FEW_COLOURS distinct colours (a graphic: a palette keeps every one of them). */
  fewColours: boolean;
  /** The output keeps several frames (animated WebP in and out). */
  animated: boolean;
}

/** A palette (PNG) holds at most this many colours; an image within it is a graphic. */
export const FEW_COLOURS = 256;

/**
 * Cheapest to encode first, so a time budget that runs out drops the costly ones: JPEG, WebP,
 * the lossless pair, AVIF (libaom is 10–20× slower than libwebp at the same effort).
 */
const SEARCH_ORDER: readonly CandidateSpec[] = [
  { format: 'jpeg', lossless: false },
  { format: 'webp', lossless: false },
  { format: 'png', lossless: true },
  { format: 'webp', lossless: true },
  { format: 'avif', lossless: false },
];

/** The formats an auto encode may choose among: `accept`, or all. */
export function acceptedFormats(params: ImageEncodeParams): readonly ImageFormat[] {
  if (params.format !== AUTO_IMAGE_FORMAT) return [params.format];
  return params.accept ?? IMAGE_FORMATS;
}

/**
 * The encodings a job weighs. A fixed format with an `ssim` target: that format alone (PNG's
 * search runs over its palette quality, with lossless truecolour at the top). `auto`, within
 * the accepted formats:
 * - AVIF, WebP and JPEG lossy, always; JPEG not when the image is transparent (it has no
 *   alpha and would put the image on white);
 * - lossless PNG and WebP too for graphics (transparency or few colours), where they are often
 *   smaller than any lossy encoding and exact;
 * - an animation keeps its frames only as WebP, so WebP alone when it is accepted;
 * - when nothing is left (only JPEG accepted for a transparent image), JPEG on white, as a
 *   fixed JPEG is written.
 */
export function candidatesFor(params: ImageEncodeParams, traits: ImageTraits): CandidateSpec[] {
  if (params.format !== AUTO_IMAGE_FORMAT) return [{ format: params.format, lossless: false }];
  const accepted = acceptedFormats(params);
  const graphic = traits.transparent || traits.fewColours;
  const animatedWebp = traits.animated && accepted.includes('webp');
  const candidates = SEARCH_ORDER.filter(
    (candidate) =>
      accepted.includes(candidate.format) &&
      (!animatedWebp || candidate.format === 'webp') &&
      (!candidate.lossless || graphic) &&
      !(candidate.format === 'jpeg' && traits.transparent),
  );
  return candidates.length > 0 ? candidates : [{ format: 'jpeg', lossless: false }];
}

/**
 * The API qualities a lossy search runs over, how many encodes it may spend per format, and
 * when it is close enough. From 1: targets of the allowed range (IMAGE_SSIM_TARGET, from 0.80)
 * are met below 20 on most images (at 0.95 the reference encoders needed `cwebp` q0–12 and
 * `avifenc` cq49–63 on 12 of 14 photos, and flat graphics reach 0.98 there), and a floor of 20
 * made every such output larger than it needed to be. Above 95 files grow fast for little
 * score, and a target that needs more is met by lossless graphics or not at all. PNG (fixed, with a target) runs to 100, its lossless
 * truecolour, which meets every target. The search stops once the lowest passing quality is
 * known within `resolution` (the API's steps of 1 are finer than any codec's visible steps).
 */
export const QUALITY_SEARCH = {
  min: 1,
  max: 95,
  pngMax: 100,
  /**
   * Every format alike. AVIF once had 4 (its encodes cost 10–20× WebP's), but its score often
   * jumps between neighbouring qualities, and 4 left five corpus images 0.003–0.009 above the
   * target; 6 took their AVIF from 101.0 to 93.9 kB (scripts/bench/image-corpus.ts, the
   * worker's README). A search encodes a sample of at most SAMPLE_MAX_PIXELS under the job's
   * time budget, and spends the extra encodes only while its bracket is still wide.
   */
  probes: 6,
  resolution: 2,
} as const;

/**
 * Above this API quality one step is 2.5 AVIF steps (avifQualityFor), so an AVIF search there
 * is only done when it knows the lowest passing quality exactly: within 2 it could settle 5
 * AVIF steps (often 20–40 % of the size) higher than needed.
 */
export const AVIF_STEEP_FROM_QUALITY = 80;

/** Where a candidate's search is done: the bracket's width by the quality it passes at. */
export function resolutionFor(candidate: CandidateSpec): (passing: number) => number {
  return (passing) =>
    candidate.format === 'avif' && passing > AVIF_STEEP_FROM_QUALITY
      ? 1
      : QUALITY_SEARCH.resolution;
}

/**
 * The first quality a candidate's search tries (undefined: the middle of the range). Without an
 * `ssim` target the job's quality: the API's qualities are aligned across codecs, and the target
 * is JPEG's score at it. With one, where the previous lossy candidate settled (`previous`),
 * which holds between JPEG and WebP and saves them encodes, but not for AVIF: on a photo WebP
 * settled at 87 where AVIF needed 73, and an AVIF search started at 87 stayed there, so AVIF
 * starts in the middle.
 */
export function searchStartFor(
  candidate: CandidateSpec,
  params: ImageEncodeParams,
  previous: number | undefined,
): number | undefined {
  if (params.ssim === undefined) return params.quality;
  return candidate.format === 'avif' ? undefined : previous;
}

export interface QualityRange {
  min: number;
  max: number;
}

export function qualityRangeFor(candidate: CandidateSpec): QualityRange {
  return {
    min: QUALITY_SEARCH.min,
    max: candidate.format === 'png' ? QUALITY_SEARCH.pngMax : QUALITY_SEARCH.max,
  };
}

/** One encode of a search: the quality tried, its size and its score. */
export interface Probe {
  quality: number;
  bytes: number;
  ssim: number;
}

/**
 * The lowest quality whose score meets the target, in at most `maxProbes` encodes: the first
 * at `start` or the middle of the range, then by interpolation between the closest failing and passing
 * qualities (the score is smooth in quality, so 3–4 encodes usually settle it, where bisection
 * needs 6), by bisection while one side is still open, and always strictly inside the bracket
 * so every encode narrows it. It assumes the score rises with quality, which holds for every
 * codec here up to small wobbles; a wobble can only make it settle a step higher than needed,
 * never return a quality that was not measured to meet the target.
 *
 * Interpolation aims at the target, so it tends to land just short of it, and a codec's score
 * has flat stretches (neighbouring API qualities that give the same file). So it bisects after
 * an interpolation that did not halve the bracket, and after an encode that gave the same file
 * as another quality; and the last encode goes no lower than the bracket's middle, towards the
 * passing side: short of the target it would leave the bracket's top as the result.
 */
export class QualitySearch {
  readonly #target: number;
  readonly #maxProbes: number;
  readonly #resolution: (passing: number) => number;
  /** Highest quality known to fail (or one below the range) and lowest known to pass (or one above). */
  #failing: { quality: number; ssim?: number };
  #passing: { quality: number; ssim?: number };
  readonly probes: Probe[] = [];

  constructor(
    target: number,
    range: QualityRange,
    options: {
      maxProbes?: number;
      /** Close enough: a width of the bracket, or one by the quality that passes. */
      resolution?: number | ((passing: number) => number);
      /** The first quality to try (e.g. the job's quality), instead of the range's middle. */
      start?: number;
    } = {},
  ) {
    if (!(range.min <= range.max)) {
      throw new RangeError(`empty quality range ${range.min}–${range.max}`);
    }
    const resolution = options.resolution ?? QUALITY_SEARCH.resolution;
    this.#target = target;
    this.#maxProbes = options.maxProbes ?? QUALITY_SEARCH.probes;
    this.#resolution = typeof resolution === 'number' ? () => resolution : resolution;
    this.#failing = { quality: range.min - 1 };
    this.#passing = { quality: range.max + 1 };
    this.#start = options.start;
  }

  readonly #start: number | undefined;

  /** The next quality to encode (ask once per encode), or undefined when the search is over. */
  next(): number | undefined {
    const low = this.#failing.quality;
    const high = this.#passing.quality;
    if (this.probes.length >= this.#maxProbes || high - low <= 1) return undefined;
    // Found within the resolution: a passing quality at most `resolution` above a failing one.
    if (this.#passing.ssim !== undefined && high - low <= this.#resolution(high)) return undefined;
    const middle = Math.ceil((low + high) / 2);
    let quality = this.probes.length === 0 && this.#start !== undefined ? this.#start : middle;
    // Interpolation creeps when the score has a step (it keeps landing just short of it): an
    // interpolated encode that did not halve the bracket is followed by a bisection.
    const crept = this.#bracketBefore !== undefined && high - low > this.#bracketBefore / 2;
    this.#bracketBefore = undefined;
    if (this.#canInterpolate() && !crept && !this.#sameFileAsBefore) {
      quality = this.#interpolated(low, high);
      this.#bracketBefore = high - low;
      if (this.probes.length === this.#maxProbes - 1) quality = Math.max(quality, middle);
    }
    return Math.min(high - 1, Math.max(low + 1, quality));
  }

  #canInterpolate(): boolean {
    const { ssim: lowScore } = this.#failing;
    const { ssim: highScore } = this.#passing;
    return lowScore !== undefined && highScore !== undefined && highScore > lowScore;
  }

  /** Where the score, linear between the bracket's ends, reaches the target. */
  #interpolated(low: number, high: number): number {
    const lowScore = this.#failing.ssim!;
    const share = (this.#target - lowScore) / (this.#passing.ssim! - lowScore);
    return Math.round(low + share * (high - low));
  }

  /** The bracket's width before an interpolated encode, to see whether it halved. */
  #bracketBefore: number | undefined;
  /** The last encode gave a file of the same size as another quality's: the score is flat there. */
  #sameFileAsBefore = false;

  record(probe: Probe): void {
    this.#sameFileAsBefore = this.probes.some(
      (earlier) => earlier.bytes === probe.bytes && earlier.quality !== probe.quality,
    );
    this.probes.push(probe);
    if (probe.ssim >= this.#target) {
      if (probe.quality < this.#passing.quality) this.#passing = probe;
    } else if (probe.quality > this.#failing.quality) {
      this.#failing = probe;
    }
  }

  /** The lowest quality measured to meet the target (the smallest file), if any. */
  get best(): Probe | undefined {
    return lowestMeeting(this.probes, this.#target) ?? undefined;
  }

  /** The highest-scoring encode, for when none met the target. */
  get closest(): Probe | undefined {
    return this.probes.reduce<Probe | undefined>(
      (best, probe) => (best === undefined || probe.ssim > best.ssim ? probe : best),
      undefined,
    );
  }
}

function lowestMeeting(probes: readonly Probe[], target: number): Probe | undefined {
  return probes
    .filter((probe) => probe.ssim >= target)
    .reduce<Probe | undefined>(
      (best, probe) =>
        best === undefined ||
        probe.bytes < best.bytes ||
        (probe.bytes === best.bytes && probe.quality < best.quality)
          ? probe
          : best,
      undefined,
    );
}

/** A candidate's outcome: its settled encode, or why it was not tried. */
export interface CandidateOutcome {
  spec: CandidateSpec;
  /** The encode it settled on (quality undefined when lossless); absent when skipped. */
  settled?: Probe;
  /** Every encode its search measured on the sample (calibratedQuality reads them). */
  probes?: readonly Probe[];
  meetsTarget?: boolean;
  skipped?: NonNullable<ImageCandidate['skipped']>;
}

/**
 * The winner: the smallest encode that meets the target; when none does, the one that comes
 * closest (the highest score), so a job always has an output. Ties go to the earlier
 * candidate (the cheaper to decode).
 */
export function chooseCandidate(outcomes: readonly CandidateOutcome[]): CandidateOutcome {
  const tried = outcomes.filter((outcome) => outcome.settled !== undefined);
  const meeting = tried.filter((outcome) => outcome.meetsTarget);
  const pool = meeting.length > 0 ? meeting : tried;
  const better = (a: CandidateOutcome, b: CandidateOutcome) =>
    meeting.length > 0 ? a.settled!.bytes < b.settled!.bytes : a.settled!.ssim > b.settled!.ssim;
  const winner = pool.reduce<CandidateOutcome | undefined>(
    (best, outcome) => (best === undefined || better(outcome, best) ? outcome : best),
    undefined,
  );
  if (winner === undefined) throw new RangeError('no candidate was encoded');
  return winner;
}

/**
 * A lower quality to try at full size when the output, scored in place, beat what the mosaic
 * predicted at the same quality. The mosaic's seams cost some codecs' sample a score the image
 * in place does not lose (Tamp's AVIF on the corpus' wood render scores 0.0035 lower on the
 * mosaic at every quality, so the search settled at API 60 where 52 reaches the target), so the
 * sample's probes are shifted by that bias, measured at the settled quality, and the quality
 * where the shifted scores reach the target is interpolated between the closest probes below
 * it, rounded up. Undefined when there is no bias or nothing below the settled quality is
 * predicted to pass. A prediction only: the caller keeps it only if it passes in place too.
 */
export function calibratedQuality(
  probes: readonly Probe[],
  settled: Probe,
  inPlaceScore: number,
  target: number,
): number | undefined {
  const bias = inPlaceScore - settled.ssim;
  if (bias <= 0 || inPlaceScore < target) return undefined;
  const predicted = (probe: Probe) => probe.ssim + bias;
  const below = probes
    .filter((probe) => probe.quality < settled.quality)
    .sort((a, b) => a.quality - b.quality);
  const passing = below.find((probe) => predicted(probe) >= target) ?? settled;
  const failing = below.findLast(
    (probe) => probe.quality < passing.quality && predicted(probe) < target,
  );
  if (failing === undefined) return passing === settled ? undefined : passing.quality;
  const rise = predicted(passing) - predicted(failing);
  const at =
    failing.quality +
    ((target - predicted(failing)) * (passing.quality - failing.quality)) / Math.max(rise, 1e-9);
  const quality = Math.min(passing.quality, Math.max(failing.quality + 1, Math.ceil(at)));
  return quality < settled.quality ? quality : undefined;
}

/**
 * The time a job's search may take (LIMITS.imageSearchBudgetMs), on a clock it is handed. The
 * first candidate always runs (a job needs an output); each later one is dropped as soon as
 * its first encode shows that finishing it would overrun (projectedCandidateMs).
 */
export class SearchBudget {
  readonly #startedAt: number;
  readonly #budgetMs: number;
  readonly #now: () => number;

  constructor(budgetMs: number, now: () => number) {
    this.#budgetMs = budgetMs;
    this.#now = now;
    this.#startedAt = now();
  }

  get elapsedMs(): number {
    return this.#now() - this.#startedAt;
  }

  /** Whether work projected to take `projectedMs` more still ends within the budget. */
  allows(projectedMs: number): boolean {
    return this.elapsedMs + projectedMs <= this.#budgetMs;
  }
}

/**
 * What is left of a candidate after its first encode took `probeMs` on the sample: the rest of
 * its search and, when the sample is not the whole image, what its full-size encode (projected
 * as `fullPixels / samplePixels` times its first encode) would cost beyond the leader's (whose
 * first encode took `leaderProbeMs`): one full-size encode is owed whichever wins, so the
 * budget bounds the search, and the winner's full-size encode comes on top of it.
 */
export function projectedCandidateMs(options: {
  probeMs: number;
  remainingProbes: number;
  samplePixels: number;
  fullPixels: number;
  leaderProbeMs: number;
}): number {
  const { probeMs, remainingProbes, samplePixels, fullPixels, leaderProbeMs } = options;
  const scale = fullPixels > samplePixels ? fullPixels / samplePixels : 0;
  return probeMs * remainingProbes + Math.max(0, (probeMs - leaderProbeMs) * scale);
}

/** Up to FEW_COLOURS + 1 distinct colours of raw interleaved 8-bit pixels (early exit). */
export function hasFewColours(pixels: Uint8Array, channels: number): boolean {
  const seen = new Set<number>();
  for (let offset = 0; offset < pixels.length; offset += channels) {
    let colour = 0;
    for (let channel = 0; channel < channels; channel++) {
      colour = colour * 256 + pixels[offset + channel]!;
    }
    seen.add(colour);
    if (seen.size > FEW_COLOURS) return false;
  }
  return true;
}

/** Whether any pixel of raw interleaved pixels with alpha last is not fully opaque. */
export function hasTransparency(pixels: Uint8Array, channels: number): boolean {
  if (channels !== 2 && channels !== 4) return false;
  for (let offset = channels - 1; offset < pixels.length; offset += channels) {
    if (pixels[offset] !== 255) return true;
  }
  return false;
}
