import type { AudioOperationOf } from './audio-operations';

type TrimSilenceOperation = AudioOperationOf<'trim-silence'>;
type NormalizeOperation = AudioOperationOf<'normalize'>;
type CompressOperation = AudioOperationOf<'compress'>;
type SpeedupOperation = AudioOperationOf<'speedup'>;

import type { EncoderSettings } from './encoder-settings';
import type { LoudnessSummary, SilenceMap } from './measurement-parsers';
import {
  keepFramesExpression,
  keptSilenceSec,
  silenceCuts,
  silenceThresholdDb,
} from './silence-cuts';

/**
 * Mappings from the public operation parameters to ffmpeg filters. Each function returns one
 * filtergraph fragment (filters joined by commas) or null when the operation is a no-op.
 */

/** Numbers in filter arguments: enough precision, no exponent notation, no trailing zeros. */
export function formatNumber(value: number, decimals = 6): string {
  return Number(value.toFixed(decimals)).toString();
}

export function decibelsToLinear(db: number): number {
  return 10 ** (db / 20);
}

/**
 * Converts everything to float samples at the encoder's rate and channel count up front:
 * every later filter and measurement then sees exactly what the encoder will get, a stereo
 * input to mono output is measured as mono, and nothing is resampled twice.
 */
export function preludeFilter(output: EncoderSettings): string {
  const layout = output.channels === 2 ? 'stereo' : 'mono';
  return `aformat=sample_fmts=fltp:sample_rates=${output.sampleRate}:channel_layouts=${layout}`;
}

// --- trim-silence -----------------------------------------------------------------------

export function silenceDetectFilter(operation: TrimSilenceOperation): string {
  const thresholdDb = silenceThresholdDb(operation.params.aggressiveness);
  const minSec = operation.params.minSilenceDuration / 1000;
  return `silencedetect=noise=${formatNumber(thresholdDb, 2)}dB:duration=${formatNumber(minSec, 3)}`;
}

/** Cuts at 10 ms granularity: aselect keeps or drops whole frames. */
export function silenceCutFilter(
  operation: TrimSilenceOperation,
  silences: SilenceMap,
  sampleRate: number,
): string | null {
  const minSec = operation.params.minSilenceDuration / 1000;
  const cuts = silenceCuts(
    silences.intervals,
    minSec,
    keptSilenceSec(operation.params.minSilenceDuration),
  );
  if (cuts.length === 0) return null;
  const frameSamples = Math.max(1, Math.round(sampleRate / 100));
  return [
    `asetnsamples=n=${frameSamples}:p=0`,
    `aselect='${keepFramesExpression(cuts)}'`,
    // aselect leaves holes in the timestamps; renumber so later filters see a gapless stream.
    'asetpts=N/SR/TB',
  ].join(',');
}

// --- normalize --------------------------------------------------------------------------

/** Sample-peak ceiling after loudness normalisation; leaves headroom for lossy overshoot. */
export const LIMITER_CEILING_DB = -1.5;

/**
 * Where a limited normalisation is measured, in dB over the gain that closes the measured
 * loudness gap: all in one pass, one branch each (see `offsetReachingTarget`).
 */
export const LIMITER_PROBE_OFFSETS_DB: readonly number[] = [0, 3];

/** One scan gives integrated loudness, loudness range and sample peak. */
export function levelScanFilter(): string {
  // framelog=verbose keeps the 10-per-second momentary lines out of the info-level log.
  return 'ebur128=peak=sample:framelog=verbose';
}

/** The gain that would bring the measured level to the target; null for silence. */
export function levelGapDb(
  operation: NormalizeOperation,
  measured: LoudnessSummary,
): number | null {
  const level = operation.params.peakNormalize ? measured.peakDb : measured.integratedLufs;
  return level === null ? null : operation.params.targetLevel - level;
}

/** True when the gain would push sample peaks over the ceiling, so a limiter must follow. */
export function loudnessNeedsLimiter(
  operation: NormalizeOperation,
  measured: LoudnessSummary,
): boolean {
  if (operation.params.peakNormalize) return false;
  if (measured.integratedLufs === null || measured.peakDb === null) return false;
  const gain = operation.params.targetLevel - measured.integratedLufs;
  return measured.peakDb + gain > LIMITER_CEILING_DB;
}

/** `volume`, followed by the peak limiter when the gain needs one. */
export function gainFilter(gainDb: number, limiter: boolean): string {
  const volume = `volume=${formatNumber(gainDb, 3)}dB`;
  if (!limiter) return volume;
  const limit = formatNumber(decibelsToLinear(LIMITER_CEILING_DB), 6);
  return `${volume},alimiter=limit=${limit}:attack=5:release=50:level=false:latency=true`;
}

/** What came out of one branch of a gain pass. */
export interface GainProbe {
  offsetDb: number;
  measured: LoudnessSummary;
}

function byOffset(probes: readonly GainProbe[]): GainProbe[] {
  return [...probes].sort((a, b) => a.offsetDb - b.offsetDb);
}

/**
 * The extra gain at which the loudness after the limiter reaches the target. Loudness rises
 * with gain, but by less than the gain once the limiter works (it also lowers loudness), so
 * between two probes the gain is interpolated; past the probes the remaining gap is added one
 * for one, the rule the earlier correction passes followed.
 */
export function offsetReachingTarget(targetLufs: number, probes: readonly GainProbe[]): number {
  const points = byOffset(probes).flatMap(({ offsetDb, measured }) =>
    measured.integratedLufs === null ? [] : [{ offsetDb, lufs: measured.integratedLufs }],
  );
  const first = points[0];
  if (!first) return 0;
  if (targetLufs <= first.lufs) return first.offsetDb + (targetLufs - first.lufs);
  for (let index = 1; index < points.length; index++) {
    const low = points[index - 1]!;
    const high = points[index]!;
    if (targetLufs <= high.lufs) {
      // low.lufs < target <= high.lufs, so the rise is positive.
      const slope = (high.lufs - low.lufs) / (high.offsetDb - low.offsetDb);
      return low.offsetDb + (targetLufs - low.lufs) / slope;
    }
  }
  const last = points.at(-1)!;
  return last.offsetDb + (targetLufs - last.lufs);
}

function interpolateLevel(
  low: number | null,
  high: number | null,
  fraction: number,
): number | null {
  if (low === null || high === null) return fraction < 0.5 ? low : high;
  return low + (high - low) * fraction;
}

/**
 * A level measured further down the chain in every branch of a gain pass, estimated at the
 * offset finally chosen: linear between the two nearest branches (extrapolated past the ends,
 * shifted one for one when there is only one).
 */
export function levelAtOffset(probes: readonly GainProbe[], offsetDb: number): LoudnessSummary {
  const points = byOffset(probes);
  if (points.length === 1) {
    const { measured, offsetDb: measuredAt } = points[0]!;
    const shift = (level: number | null) => (level === null ? null : level + offsetDb - measuredAt);
    return {
      ...measured,
      integratedLufs: shift(measured.integratedLufs),
      peakDb: shift(measured.peakDb),
    };
  }
  // The segment around the offset, or the first or last one past the ends.
  const above = points.findIndex((point) => point.offsetDb >= offsetDb);
  const upper = above === -1 ? points.length - 1 : Math.max(1, above);
  const low = points[upper - 1]!;
  const high = points[upper]!;
  const fraction = (offsetDb - low.offsetDb) / (high.offsetDb - low.offsetDb);
  return {
    kind: 'loudness',
    integratedLufs: interpolateLevel(
      low.measured.integratedLufs,
      high.measured.integratedLufs,
      fraction,
    ),
    loudnessRangeLu: interpolateLevel(
      low.measured.loudnessRangeLu,
      high.measured.loudnessRangeLu,
      fraction,
    ),
    peakDb: interpolateLevel(low.measured.peakDb, high.measured.peakDb, fraction),
  };
}

// --- compress ---------------------------------------------------------------------------

/** acompressor's smallest accepted attack/release (ms); the API allows 0. */
const ACOMPRESSOR_MIN_TIME_MS = 0.01;
/** acompressor's threshold floor is 2^-10 (≈ -60.2 dBFS). */
const ACOMPRESSOR_MIN_THRESHOLD = 0.000976563;

export function compressorFilter(operation: CompressOperation): string {
  const { ratio, threshold, attack, release } = operation.params;
  const linearThreshold = Math.max(ACOMPRESSOR_MIN_THRESHOLD, decibelsToLinear(threshold));
  return [
    `acompressor=threshold=${formatNumber(linearThreshold, 9)}`,
    `ratio=${formatNumber(ratio, 3)}`,
    `attack=${formatNumber(Math.max(ACOMPRESSOR_MIN_TIME_MS, attack), 3)}`,
    `release=${formatNumber(Math.max(ACOMPRESSOR_MIN_TIME_MS, release), 3)}`,
  ].join(':');
}

// --- speedup ----------------------------------------------------------------------------

/** atempo accepts up to 100 per stage, but skips audible chunks above 2×; chain instead. */
const ATEMPO_MAX_STAGE = 2;
const ATEMPO_MIN_STAGE = 0.5;

/** Splits a rate into equal stages within [0.5, 2]: 5.0 → three stages of ≈1.71. */
export function atempoStages(rate: number): number[] {
  if (rate >= ATEMPO_MIN_STAGE && rate <= ATEMPO_MAX_STAGE) return [rate];
  const limit = rate > ATEMPO_MAX_STAGE ? ATEMPO_MAX_STAGE : ATEMPO_MIN_STAGE;
  const count = Math.ceil(Math.log(rate) / Math.log(limit));
  const stage = rate ** (1 / count);
  return Array.from({ length: count }, () => stage);
}

export function speedupFilter(operation: SpeedupOperation): string | null {
  if (operation.params.rate === 1) return null;
  return atempoStages(operation.params.rate)
    .map((stage) => `atempo=${formatNumber(stage, 6)}`)
    .join(',');
}
