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

/** A correction pass is only worth it when the limiter cost more than this (LU). */
export const LOUDNESS_TOLERANCE_LU = 0.5;

/** One scan gives integrated loudness, loudness range and sample peak. */
export function levelScanFilter(): string {
  // framelog=verbose keeps the 10-per-second momentary lines out of the info-level log.
  return 'ebur128=peak=sample:framelog=verbose';
}

export function loudnessGainDb(
  operation: NormalizeOperation,
  measured: LoudnessSummary,
  corrections: readonly LoudnessSummary[],
): number | null {
  if (measured.integratedLufs === null) return null;
  const target = operation.params.targetLevel;
  let gain = target - measured.integratedLufs;
  for (const correction of corrections) {
    if (correction.integratedLufs !== null) gain += target - correction.integratedLufs;
  }
  return gain;
}

/** True when the gain would push sample peaks over the ceiling, so a limiter must follow. */
export function loudnessNeedsLimiter(
  operation: NormalizeOperation,
  measured: LoudnessSummary,
): boolean {
  if (measured.integratedLufs === null || measured.peakDb === null) return false;
  const gain = operation.params.targetLevel - measured.integratedLufs;
  return measured.peakDb + gain > LIMITER_CEILING_DB;
}

export function loudnessNormalizeFilter(
  operation: NormalizeOperation,
  measured: LoudnessSummary,
  corrections: readonly LoudnessSummary[],
): string | null {
  const gain = loudnessGainDb(operation, measured, corrections);
  if (gain === null) return null;
  const volume = `volume=${formatNumber(gain, 3)}dB`;
  if (!loudnessNeedsLimiter(operation, measured)) return volume;
  const limit = formatNumber(decibelsToLinear(LIMITER_CEILING_DB), 6);
  return `${volume},alimiter=limit=${limit}:attack=5:release=50:level=false:latency=true`;
}

export function peakNormalizeFilter(
  operation: NormalizeOperation,
  measured: LoudnessSummary,
): string | null {
  if (measured.peakDb === null) return null;
  return `volume=${formatNumber(operation.params.targetLevel - measured.peakDb, 3)}dB`;
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
