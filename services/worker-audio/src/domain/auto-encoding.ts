import {
  AUDIO_AUTO_ENCODINGS,
  type AudioAutoChoice,
  type AudioClass,
  type AudioEncodeOperation,
} from '@tamp/proto';
import { opusApplication } from './encoder-settings';
import type { LineCollector } from './measurement-parsers';

/**
 * `format: "auto"` (services/worker-audio/README.md#auto): the input is heard as speech or music
 * from a few numbers one ffmpeg pass measures on it, and encoded as Opus for that class. Why
 * these measures, out of the many that separate speech from music:
 *
 * - **Pauses and syllables** (`pauseShare`, `envelopeModulationDb`): speech stops between words
 *   and sentences and its level jumps with every syllable, while most music is continuous.
 *   Measured: espeak-ng speech pauses 0.17–0.46 of the time; three real game-music tracks and a
 *   tracker tune 0.02–0.07. Staccato melodies and drum loops stop and jump too (0.2–0.5).
 * - **A beat** (`beatRegularity`): music repeats at a tempo, so its level envelope correlates
 *   with itself one beat or bar later; speech has no fixed period. This is what tells rhythmic
 *   music with rests from speech: speech 0–0.2, synthesised chords, melodies and drums
 *   0.88–0.96, the real tracks 0.51–0.85.
 * - **Stereo correlation**: not a class, but whether music needs two channels at all.
 *
 * Speech needs all three signs (pauses, jumps, no beat): taking music for speech costs quality
 * (24 kbit/s voip), taking speech for music only bytes, so doubt goes to music. All of it comes
 * from one cheap pass (per-frame RMS level and `aphasemeter`'s correlation, no FFT). Spectral
 * flatness and zero-crossing variance were tried and dropped: noise-burst percussion scores like
 * unvoiced speech on both.
 */

/** Frames of 50 ms: short enough to see the gaps between words, long enough for a level. */
export const ANALYSIS_FRAME_SEC = 0.05;

/** Frames this far under the loud level (the 90th percentile) are pauses. */
const PAUSE_BELOW_LOUD_DB = 20;
/** The envelope is floored this far under the loud level, so room noise does not count as jumps. */
const ENVELOPE_FLOOR_BELOW_LOUD_DB = 40;
/** Beat periods looked for: 0.25 s (240 bpm) to 3 s (a slow bar). */
const BEAT_LAGS = { min: 5, max: 60 } as const;
/** Below this nothing is heard: a silent input takes the smallest encoding (speech). */
const AUDIBLE_DBFS = -60;

/** Thresholds between the measured clusters (see the comment above and the README's table). */
export const CLASS_THRESHOLDS = {
  /** At or above: the envelope repeats like music. */
  beatRegularity: 0.5,
  /** At or above (both): the envelope stops and jumps like speech. */
  pauseShare: 0.1,
  envelopeModulationDb: 3,
  /** At or above: left and right carry the same signal, music is encoded mono. */
  monoCorrelation: 0.95,
} as const;

export type ContentMeasures = AudioAutoChoice['measures'];

/** What the analysis pass reports for each 50 ms frame. */
export interface AnalysisFrame {
  /** RMS level, dBFS; null for digital silence. */
  rmsDb: number | null;
  /** Correlation of left and right, −1 to 1 (a mono input is analysed as two equal channels). */
  correlation: number | null;
}

/**
 * The analysis pass: the input as stereo (a mono input duplicated, so its correlation is 1) at
 * its own sample rate (resampling would double the pass's CPU and change no level), cut into
 * 50 ms frames, each frame's RMS level and correlation printed by `ametadata`.
 */
export function contentAnalysisFilter(sampleRate: number): string {
  return [
    'aformat=sample_fmts=fltp:channel_layouts=stereo',
    `asetnsamples=n=${Math.round(ANALYSIS_FRAME_SEC * sampleRate)}:p=0`,
    'astats=metadata=1:reset=1:measure_perchannel=none:measure_overall=RMS_level',
    'aphasemeter=video=0',
    'ametadata=mode=print',
  ].join(',');
}

const RMS_KEY = 'lavfi.astats.Overall.RMS_level=';
const CORRELATION_KEY = 'lavfi.aphasemeter.phase=';

/** Reads the analysis pass's `ametadata` lines, one frame per `frame:` line. */
export function analysisFramesCollector(): LineCollector<AnalysisFrame[]> {
  const frames: AnalysisFrame[] = [];
  let current: AnalysisFrame | null = null;
  return {
    accept(line) {
      if (!line.includes('[Parsed_ametadata_')) return;
      if (/\] frame:\d+/.test(line)) {
        current = { rmsDb: null, correlation: null };
        frames.push(current);
        return;
      }
      if (!current) return;
      const rms = valueAfter(line, RMS_KEY);
      if (rms !== undefined) current.rmsDb = rms;
      const correlation = valueAfter(line, CORRELATION_KEY);
      if (correlation !== undefined) current.correlation = correlation;
    },
    finish() {
      return frames;
    },
  };
}

/** The number after `key` on the line; null for -inf/nan, undefined when the key is absent. */
function valueAfter(line: string, key: string): number | null | undefined {
  const at = line.indexOf(key);
  if (at < 0) return undefined;
  const value = Number.parseFloat(line.slice(at + key.length));
  return Number.isFinite(value) ? value : null;
}

export function contentMeasures(frames: readonly AnalysisFrame[]): ContentMeasures {
  const levels = frames.map((frame) => frame.rmsDb ?? Number.NEGATIVE_INFINITY);
  const loud = percentile(levels, 0.9);
  // Digital silence throughout (or no frame at all): nothing to measure.
  if (!Number.isFinite(loud)) {
    return { pauseShare: 1, envelopeModulationDb: 0, beatRegularity: 0, stereoCorrelation: 1 };
  }
  const pauseLevel = loud - PAUSE_BELOW_LOUD_DB;
  const envelope = levels.map((level) => Math.max(level, loud - ENVELOPE_FLOOR_BELOW_LOUD_DB));
  const sounding = frames.filter((_, index) => levels[index]! >= pauseLevel);
  const correlations = sounding
    .map((frame) => frame.correlation)
    .filter((value): value is number => value !== null);
  return {
    pauseShare: round3(levels.filter((level) => level < pauseLevel).length / levels.length),
    envelopeModulationDb: round3(meanAbsoluteStep(envelope)),
    beatRegularity: round3(beatRegularity(envelope)),
    stereoCorrelation: round3(correlations.length === 0 ? 1 : mean(correlations)),
  };
}

/** Speech or music, from the measures (thresholds: CLASS_THRESHOLDS). */
export function classifyContent(measures: ContentMeasures): AudioClass {
  const beat = measures.beatRegularity >= CLASS_THRESHOLDS.beatRegularity;
  const stopsAndJumps =
    measures.pauseShare >= CLASS_THRESHOLDS.pauseShare &&
    measures.envelopeModulationDb >= CLASS_THRESHOLDS.envelopeModulationDb;
  return stopsAndJumps && !beat ? 'speech' : 'music';
}

/** The whole decision: class, then proto's encoding for it. */
export function chooseAutoEncoding(
  frames: readonly AnalysisFrame[],
  inputChannels: number,
): AudioAutoChoice {
  const measures = contentMeasures(frames);
  const audible = frames.some((frame) => frame.rmsDb !== null && frame.rmsDb >= AUDIBLE_DBFS);
  // Nothing to hear, nothing to keep: a silent input takes the smallest encoding.
  const audioClass = audible ? classifyContent(measures) : 'speech';
  const stereo =
    audioClass === 'music' &&
    inputChannels >= 2 &&
    measures.stereoCorrelation < CLASS_THRESHOLDS.monoCorrelation;
  const encoding =
    audioClass === 'speech'
      ? AUDIO_AUTO_ENCODINGS.speech
      : stereo
        ? AUDIO_AUTO_ENCODINGS.musicStereo
        : AUDIO_AUTO_ENCODINGS.musicMono;
  return {
    class: audioClass,
    application: opusApplication(encoding.bitrate),
    bitrate: encoding.bitrate,
    channels: encoding.channels,
    measures,
  };
}

/** The encode an auto encode becomes once chosen. */
export function chosenEncode(
  choice: Pick<AudioAutoChoice, 'bitrate' | 'channels'>,
): AudioEncodeOperation {
  return {
    type: 'encode',
    params: { format: 'opus', bitrate: choice.bitrate, channels: choice.channels },
  };
}

/**
 * The strongest self-similarity of the envelope at a beat's period: its autocorrelation past
 * the first dip (every smooth envelope correlates with itself a frame later; a beat comes back
 * after falling away), 0 when there is nothing to correlate.
 */
function beatRegularity(envelope: readonly number[]): number {
  const centred = envelope.map((value) => value - mean(envelope));
  const energy = centred.reduce((sum, value) => sum + value * value, 0);
  const maxLag = Math.min(BEAT_LAGS.max, Math.floor(centred.length / 2));
  if (energy === 0 || maxLag <= BEAT_LAGS.min) return 0;
  const correlation = [1];
  for (let lag = 1; lag <= maxLag + 1; lag++) {
    let sum = 0;
    for (let index = 0; index + lag < centred.length; index++) {
      sum += centred[index]! * centred[index + lag]!;
    }
    correlation.push(sum / energy);
  }
  let best = 0;
  let pastDip = false;
  for (let lag = 1; lag <= maxLag; lag++) {
    const value = correlation[lag]!;
    if (!pastDip) {
      pastDip = value <= correlation[lag - 1]! && value <= correlation[lag + 1]!;
      continue;
    }
    if (lag >= BEAT_LAGS.min) best = Math.max(best, value);
  }
  return best;
}

function meanAbsoluteStep(values: readonly number[]): number {
  if (values.length < 2) return 0;
  let sum = 0;
  for (let index = 1; index < values.length; index++) {
    sum += Math.abs(values[index]! - values[index - 1]!);
  }
  return sum / (values.length - 1);
}

function percentile(values: readonly number[], share: number): number {
  if (values.length === 0) return Number.NEGATIVE_INFINITY;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(share * (sorted.length - 1))]!;
}

function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : values.reduce((sum, value) => sum + value, 0) / values.length;
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}
