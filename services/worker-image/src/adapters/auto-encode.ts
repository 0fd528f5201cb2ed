import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { inSpan } from '@tamp/kit';
import type { ImageCandidate } from '@tamp/proto';
import sharp from 'sharp';
import {
  type CandidateOutcome,
  type CandidateSpec,
  calibratedQuality,
  candidatesFor,
  chooseCandidate,
  hasFewColours,
  type Probe,
  projectedCandidateMs,
  QUALITY_SEARCH,
  QualitySearch,
  qualityRangeFor,
  resolutionFor,
  SearchBudget,
  searchStartFor,
} from '../domain/auto-encode';
import {
  type EncodeSettings,
  encodeSettingsFor,
  losslessEncodeSettings,
} from '../domain/encode-settings';
import { fitsFormatDimensions } from '../domain/image-limits';
import {
  type ImageMemoryDemand,
  planWithinMemory,
  referenceEncodeDemand,
  SEARCH_SAMPLE_BYTES_PER_PIXEL,
} from '../domain/memory-model';
import type { EncodeParams, ResizeParams } from '../domain/operations';
import { planSample, type SamplePlan } from '../domain/search-sample';
import { type LumaPlane, lumaOnWhite, SsimReference } from '../domain/ssim';
import {
  encodeWith,
  FAIL_ON,
  openSource,
  type PassContext,
  runPasses,
  type WrittenImage,
  writtenImage,
} from './sharp-passes';

/**
 * The search of an auto or target-quality job (domain/auto-encode.ts has its rules): the
 * resized pixels written once as an uncompressed reference, a sample of them (search-sample.ts),
 * each candidate's quality searched on the sample by SSIM against it, the winner encoded at
 * full size from the reference (and checked again on the sample's tiles when the sample was a
 * mosaic: a miss raises the quality by VERIFY_STEP, at most VERIFY_RETRIES times).
 */

const VERIFY_STEP = 3;
const VERIFY_RETRIES = 2;

export interface SearchInput {
  inputPath: string;
  outputPath: string;
  resizes: readonly ResizeParams[];
  encode: EncodeParams;
  context: PassContext;
  /** The chain's memory demand; the search encodes from the reference, of the same size. */
  chain: ImageMemoryDemand;
  /** Candidates that cannot fit the memory budget (planned before any pixel was read). */
  memorySkipped: ReadonlySet<string>;
  /** Bytes each encode must fit: what the job reserved, less the sample's buffers. */
  encodeBudgetBytes: number;
  searchBudgetMs: number;
  now: () => number;
}

export interface SearchOutput {
  format: CandidateSpec['format'];
  info: WrittenImage;
  ssim: number;
  ssimTarget: number;
  candidates: ImageCandidate[];
}

export function candidateKey(candidate: CandidateSpec): string {
  return `${candidate.format}${candidate.lossless ? '-lossless' : ''}`;
}

/** The settings of a candidate at an API quality (ignored when lossless), at its top by default. */
export function candidateSettings(
  candidate: CandidateSpec,
  encode: EncodeParams,
  fewColours: boolean,
  quality = qualityRangeFor(candidate).max,
): EncodeSettings {
  if (candidate.lossless) {
    return losslessEncodeSettings(candidate.format as 'webp' | 'png', encode.effort, fewColours);
  }
  return encodeSettingsFor({
    format: candidate.format,
    quality,
    effort: encode.effort,
    searched: true,
  });
}

interface RawImage {
  data: Buffer;
  width: number;
  height: number;
  channels: number;
}

export async function searchAndEncode(input: SearchInput): Promise<SearchOutput> {
  const scratch = await mkdtemp(join(dirname(input.outputPath), '.image-search-'));
  try {
    return await searchInScratch(input, scratch);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

async function searchInScratch(input: SearchInput, scratch: string): Promise<SearchOutput> {
  const { encode, context } = input;
  const budget = new SearchBudget(input.searchBudgetMs, input.now);
  const referencePath = join(scratch, 'reference.v');
  const reference = await inSpan('image reference', {}, () =>
    runPasses(input.inputPath, referencePath, input.resizes, (image) => image, context),
  );
  const width = reference.width;
  const height = reference.pageHeight ?? reference.height;
  const sample = planSample(width, height);
  const samplePixels = sample.width * sample.height;
  const fullPixels = width * height * context.frames;
  const referenceSample = await readSample(referencePath, sample, context);
  const referenceScore = new SsimReference(lumaOf(referenceSample));

  const transparent =
    (referenceSample.channels === 2 || referenceSample.channels === 4) &&
    !(await sharp(referencePath, { limitInputPixels: false }).stats()).isOpaque;
  const fewColours = hasFewColours(referenceSample.data, referenceSample.channels);
  const specs = candidatesFor(encode, { transparent, fewColours, animated: context.frames > 1 });

  const settingsAt = (candidate: CandidateSpec, quality?: number) =>
    planWithinMemory(
      referenceEncodeDemand(input.chain),
      candidateSettings(candidate, encode, fewColours, quality),
      input.encodeBudgetBytes,
    ).settings;
  const encoded = new Map<string, Buffer>();
  /** How long each candidate's first encode took (decode and score included). */
  const firstProbeMs = new Map<string, number>();
  const probe = async (candidate: CandidateSpec, quality: number): Promise<Probe> => {
    const startedAt = input.now();
    const settings = settingsAt(candidate, quality);
    const bytes = await encodeWith(rawSharp(referenceSample), settings).toBuffer();
    const decoded = await sharp(bytes)
      .raw({ depth: 'uchar' })
      .toBuffer({ resolveWithObject: true });
    encoded.set(`${candidateKey(candidate)}@${quality}`, bytes);
    if (!firstProbeMs.has(candidateKey(candidate))) {
      firstProbeMs.set(candidateKey(candidate), input.now() - startedAt);
    }
    const ssim = referenceScore.compare(lumaOf({ data: decoded.data, ...decoded.info }));
    return { quality, bytes: bytes.length, ssim };
  };

  // Without an ssim target, quality keeps its meaning: the target is what a JPEG at that
  // quality scores on this image, and that JPEG is the JPEG candidate.
  let jpegAtQuality: Probe | undefined;
  let target = encode.ssim;
  if (target === undefined) {
    jpegAtQuality = await probe({ format: 'jpeg', lossless: false }, encode.quality);
    target = jpegAtQuality.ssim;
  }

  const outcomes: CandidateOutcome[] = [];
  for (const spec of specs) {
    const first = outcomes.filter((outcome) => outcome.settled).length === 0;
    if (!fitsFormatDimensions(spec.format, { width, height })) {
      outcomes.push({ spec, skipped: 'dimensions' });
    } else if (input.memorySkipped.has(candidateKey(spec))) {
      outcomes.push({ spec, skipped: 'memory' });
    } else if (!first && !budget.allows(0)) {
      outcomes.push({ spec, skipped: 'time-budget' });
    } else {
      outcomes.push(
        await inSpan(
          'image candidate',
          { attributes: { 'image.candidate': candidateKey(spec) } },
          () =>
            searchCandidate(spec, {
              target: target!,
              probe,
              jpegAtQuality: spec.format === 'jpeg' && !spec.lossless ? jpegAtQuality : undefined,
              start: searchStartFor(spec, encode, lastLossyQuality(outcomes)),
              overBudget: (probeMs, remainingProbes) =>
                !first &&
                !budget.allows(
                  projectedCandidateMs({
                    probeMs,
                    remainingProbes,
                    samplePixels,
                    fullPixels,
                    leaderProbeMs:
                      firstProbeMs.get(candidateKey(chooseCandidate(outcomes).spec)) ?? 0,
                  }),
                ),
              now: input.now,
            }),
        ),
      );
    }
  }

  const winner = chooseCandidate(outcomes);
  const settled = winner.settled!;
  let quality = settled.quality;
  let ssim = settled.ssim;
  let info: SearchOutput['info'];
  const bestBytes = encoded.get(`${candidateKey(winner.spec)}@${quality}`);
  if (sample.whole && context.frames === 1 && !context.keepIccProfile && bestBytes) {
    // The search encoded exactly the output (same pixels, same settings): write it as it is.
    await writeFile(input.outputPath, bestBytes);
    info = { width, height, pages: 1, size: bestBytes.length };
  } else {
    const full = await encodeFullSize({
      settings: (at) => settingsAt(winner.spec, at),
      source: () => openSource(referencePath, false, context),
      score: sample.whole
        ? undefined
        : (encoded, attempt) =>
            scoreOutput(
              encoded,
              sample,
              context,
              join(scratch, `decoded-${attempt}.v`),
              referenceScore,
            ),
      winner,
      target,
      budget,
      now: input.now,
    });
    ({ quality, ssim } = full);
    await writeFile(input.outputPath, full.data);
    info = full.info;
  }

  const candidates: ImageCandidate[] = outcomes.map((outcome) => {
    const chosen = outcome === winner;
    const entry: ImageCandidate = { format: outcome.spec.format, lossless: outcome.spec.lossless };
    if (outcome.skipped !== undefined) return { ...entry, skipped: outcome.skipped };
    const result = outcome.settled!;
    return {
      ...entry,
      ...(!outcome.spec.lossless && { quality: chosen ? quality : result.quality }),
      ...(chosen || sample.whole
        ? { bytes: chosen ? info.size : result.bytes }
        : {
            bytes: Math.round((result.bytes * fullPixels) / samplePixels),
            estimated: true as const,
          }),
      ssim: round(chosen ? ssim : result.ssim),
      meetsTarget: (chosen ? ssim : result.ssim) >= target!,
    };
  });
  return {
    format: winner.spec.format,
    info,
    ssim: round(ssim),
    ssimTarget: round(target),
    candidates,
  };
}

function lastLossyQuality(outcomes: readonly CandidateOutcome[]): number | undefined {
  return outcomes.findLast((outcome) => outcome.settled && !outcome.spec.lossless)?.settled
    ?.quality;
}

function round(score: number): number {
  return Math.round(score * 10_000) / 10_000;
}

/**
 * The winner at full size from the reference. Encoded to memory and written once settled:
 * libvips caches decodes by file name, so a file rewritten at another quality could be scored
 * from the cache. With `score` (the sample was a mosaic) the output is checked on the same
 * tiles in place: a miss raises the quality by VERIFY_STEP, at most VERIFY_RETRIES times; a
 * score above what the mosaic predicted tries once the lower quality calibratedQuality
 * predicts, kept only if it passes in place too and the budget allows its encode.
 */
export async function encodeFullSize(options: {
  settings: (quality: number) => EncodeSettings;
  source: () => sharp.Sharp;
  score: ((encoded: Buffer, attempt: number) => Promise<number>) | undefined;
  winner: CandidateOutcome;
  target: number;
  budget: SearchBudget;
  now: () => number;
}): Promise<{ data: Buffer; info: WrittenImage; quality: number; ssim: number }> {
  const { winner, target } = options;
  const settled = winner.settled!;
  let attempt = 0;
  const encodeAt = async (quality: number) => {
    const startedAt = options.now();
    const { data, info } = await encodeWith(options.source(), options.settings(quality)).toBuffer({
      resolveWithObject: true,
    });
    const ssim = options.score ? await options.score(data, attempt++) : settled.ssim;
    return { data, info: writtenImage(info), quality, ssim, ms: options.now() - startedAt };
  };
  let full = await encodeAt(settled.quality);
  if (options.score === undefined || winner.spec.lossless) return full;
  const top = qualityRangeFor(winner.spec).max;
  for (let retry = 0; retry < VERIFY_RETRIES; retry++) {
    if (full.ssim >= target || full.quality >= top) break;
    full = await encodeAt(Math.min(top, full.quality + VERIFY_STEP));
  }
  const lower =
    full.quality === settled.quality
      ? calibratedQuality(winner.probes ?? [], settled, full.ssim, target)
      : undefined;
  if (lower !== undefined && options.budget.allows(full.ms)) {
    const calibrated = await encodeAt(lower);
    if (calibrated.ssim >= target && calibrated.data.length < full.data.length) full = calibrated;
  }
  return full;
}

async function searchCandidate(
  spec: CandidateSpec,
  options: {
    target: number;
    probe: (candidate: CandidateSpec, quality: number) => Promise<Probe>;
    jpegAtQuality: Probe | undefined;
    start: number | undefined;
    overBudget: (probeMs: number, remainingProbes: number) => boolean;
    now: () => number;
  },
): Promise<CandidateOutcome> {
  const { target, probe } = options;
  if (spec.lossless) {
    const startedAt = options.now();
    const settled = await probe(spec, 100);
    if (options.overBudget(options.now() - startedAt, 0)) return { spec, skipped: 'time-budget' };
    return { spec, settled, meetsTarget: settled.ssim >= target };
  }
  if (options.jpegAtQuality) {
    // The target's own JPEG meets it by definition.
    return { spec, settled: options.jpegAtQuality, meetsTarget: true };
  }
  const search = new QualitySearch(target, qualityRangeFor(spec), {
    start: options.start,
    maxProbes: QUALITY_SEARCH.probes,
    resolution: resolutionFor(spec),
  });
  for (let quality = search.next(); quality !== undefined; quality = search.next()) {
    const startedAt = options.now();
    search.record(await probe(spec, quality));
    const first = search.probes.length === 1;
    // A later candidate is dropped when its first encode shows it cannot finish in time; any
    // candidate stops searching once the budget is spent, settling on what it has measured.
    if (first && options.overBudget(options.now() - startedAt, QUALITY_SEARCH.probes - 1)) {
      return { spec, skipped: 'time-budget' };
    }
    if (options.overBudget(0, 0)) break;
  }
  const best = search.best;
  const probes = search.probes;
  return best
    ? { spec, settled: best, probes, meetsTarget: true }
    : { spec, settled: search.closest!, probes, meetsTarget: false };
}

function rawSharp(image: RawImage): sharp.Sharp {
  return sharp(image.data, {
    raw: { width: image.width, height: image.height, channels: image.channels as 1 | 2 | 3 | 4 },
  });
}

function lumaOf(image: RawImage): LumaPlane {
  return lumaOnWhite(image.data, image.width, image.height, image.channels);
}

/**
 * The sample's pixels from an upright image file (the `.v` reference, or a decoded output):
 * the whole image, or its tiles laid out as a mosaic. The first frame of an animation.
 */
async function readSample(path: string, plan: SamplePlan, context: PassContext): Promise<RawImage> {
  const read = (tile: SamplePlan['tiles'][number]) => {
    const image = sharp(path, { failOn: FAIL_ON, limitInputPixels: false });
    return (context.keepIccProfile ? image.keepIccProfile() : image)
      .extract({ left: tile.left, top: tile.top, width: tile.width, height: tile.height })
      .raw({ depth: 'uchar' })
      .toBuffer({ resolveWithObject: true });
  };
  if (plan.whole) {
    const { data, info } = await read(plan.tiles[0]!);
    return { data, width: info.width, height: info.height, channels: info.channels };
  }
  let mosaic: Buffer | undefined;
  let channels = 0;
  for (const tile of plan.tiles) {
    const { data, info } = await read(tile);
    channels = info.channels;
    mosaic ??= Buffer.alloc(plan.width * plan.height * channels);
    const rowBytes = tile.width * channels;
    for (let row = 0; row < tile.height; row++) {
      data.copy(
        mosaic,
        ((tile.y + row) * plan.width + tile.x) * channels,
        row * rowBytes,
        (row + 1) * rowBytes,
      );
    }
  }
  return { data: mosaic!, width: plan.width, height: plan.height, channels };
}

/**
 * SSIM of an encoded output on the sample's tiles: decoded once to `decodedPath` (a `.v` file,
 * a new name each time), then read like the reference.
 */
async function scoreOutput(
  encoded: Buffer,
  plan: SamplePlan,
  context: PassContext,
  decodedPath: string,
  reference: SsimReference,
): Promise<number> {
  await sharp(encoded, { failOn: FAIL_ON, limitInputPixels: false }).toFile(decodedPath);
  try {
    return reference.compare(lumaOf(await readSample(decodedPath, plan, context)));
  } finally {
    await rm(decodedPath, { force: true });
  }
}

/** The sample's bytes a search holds besides its encoders (for the memory plan). */
export function searchSampleBytes(width: number, height: number): number {
  const plan = planSample(width, height);
  return Math.ceil(SEARCH_SAMPLE_BYTES_PER_PIXEL * plan.width * plan.height);
}
