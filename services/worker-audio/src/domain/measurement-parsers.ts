import { MeasurementParseError } from './errors';
import type { SilentInterval } from './silence-cuts';

/**
 * ffmpeg reports measurements as log lines on stderr. Collectors consume those lines one at
 * a time so the runner never has to keep the whole stderr of a long file in memory.
 */
export interface LineCollector<T> {
  accept(line: string): void;
  finish(): T;
}

export interface LoudnessSummary {
  kind: 'loudness';
  /** LUFS; null when the signal is too quiet to be gated in (silence). */
  integratedLufs: number | null;
  /** LU; null when not measurable. */
  loudnessRangeLu: number | null;
  /** dBFS (sample or true peak, whichever the scan asked for); null for digital silence. */
  peakDb: number | null;
}

export interface SilenceMap {
  kind: 'silences';
  intervals: SilentInterval[];
}

export type Measurement = LoudnessSummary | SilenceMap;

/** ebur128 reports -70 LUFS (its absolute gate) when nothing passed the gate. */
const EBUR128_SILENCE_LUFS = -70;

function parseLevel(text: string): number | null {
  const value = text.trim().toLowerCase();
  if (value.startsWith('-inf')) return null;
  const parsed = Number.parseFloat(value);
  return Number.isFinite(parsed) ? parsed : null;
}

interface SummaryBlock {
  /** The filter's position in the graph description (`Parsed_ebur128_<n>`). */
  position: number;
  integrated?: number | null;
  range: number | null;
  peak: number | null;
}

function toLoudnessSummary(block: SummaryBlock): LoudnessSummary {
  if (block.integrated === undefined) {
    throw new MeasurementParseError('ffmpeg ebur128 printed a summary without integrated loudness');
  }
  const gatedOut = block.integrated === null || block.integrated <= EBUR128_SILENCE_LUFS;
  return {
    kind: 'loudness',
    integratedLufs: gatedOut ? null : block.integrated,
    loudnessRangeLu: gatedOut ? null : block.range,
    peakDb: block.peak,
  };
}

/**
 * Reads the `Summary:` blocks every ebur128 filter of a pass prints when the stream ends, in
 * the order the filters appear in the graph description (a pass may measure at several points).
 */
export function ebur128SummariesCollector(): LineCollector<LoudnessSummary[]> {
  const blocks: SummaryBlock[] = [];
  let current: SummaryBlock | null = null;
  return {
    accept(line) {
      const header = /\[Parsed_ebur128_(\d+) @ [^\]]+\] Summary:/.exec(line);
      if (header) {
        current = { position: Number(header[1]), range: null, peak: null };
        blocks.push(current);
        return;
      }
      if (!current) return;
      const match = /^\s*(I|LRA|Peak):\s+(\S+)/.exec(line);
      if (!match) return;
      const [, key, value = ''] = match;
      if (key === 'I') current.integrated = parseLevel(value);
      else if (key === 'LRA') current.range = parseLevel(value);
      else current.peak = parseLevel(value);
    },
    finish() {
      return [...blocks].sort((a, b) => a.position - b.position).map(toLoudnessSummary);
    },
  };
}

/** Reads the `Summary:` block of a pass with one ebur128 filter. */
export function ebur128SummaryCollector(): LineCollector<LoudnessSummary> {
  const summaries = ebur128SummariesCollector();
  return {
    accept: (line) => summaries.accept(line),
    finish() {
      const [first] = summaries.finish();
      if (!first) throw new MeasurementParseError('ffmpeg ebur128 printed no loudness summary');
      return first;
    },
  };
}

/**
 * The silencedetect filter's prefix: `[silencedetect @ 0x…]` up to ffmpeg 6, the instance name
 * `[Parsed_silencedetect_<n> @ 0x…]` from ffmpeg 7 (the pinned build is 9).
 */
const SILENCEDETECT_LINE = /\[(?:Parsed_)?silencedetect(?:_\d+)? @ /;

/** Reads `silence_start` / `silence_end` lines of the silencedetect filter. */
export function silenceDetectCollector(): LineCollector<SilenceMap> {
  const intervals: SilentInterval[] = [];
  let openStart: number | null = null;
  return {
    accept(line) {
      if (!SILENCEDETECT_LINE.test(line)) return;
      const start = /silence_start:\s*(-?[\d.]+(?:e[-+]?\d+)?)/.exec(line);
      if (start?.[1]) {
        openStart = Math.max(0, Number.parseFloat(start[1]));
        return;
      }
      const end = /silence_end:\s*(-?[\d.]+(?:e[-+]?\d+)?)/.exec(line);
      if (end?.[1] && openStart !== null) {
        intervals.push({ startSec: openStart, endSec: Number.parseFloat(end[1]) });
        openStart = null;
      }
    },
    finish() {
      const result = [...intervals];
      if (openStart !== null) result.push({ startSec: openStart, endSec: null });
      return { kind: 'silences', intervals: result };
    },
  };
}

export interface AudioProbe {
  durationSec: number;
  sampleRate: number;
  channels: number;
  codec: string;
  /** bit/s; null when the container does not say (ffprobe prints N/A). */
  bitRate: number | null;
  /** ffprobe's demuxer name, e.g. `wav`, `mp3`, `ogg`. */
  formatName: string;
  /**
   * It carries what the pipeline drops (`-map_metadata -1`, first audio stream only): tags other
   * than the encoder's name, or further streams such as cover art.
   */
  carriesMetadata: boolean;
}

/** The muxer's or encoder's own name, which every encoder writes: not the uploader's metadata. */
const ENCODER_TAG = /^encoder$/i;

function hasTagsBeyondEncoder(tags: unknown): boolean {
  if (typeof tags !== 'object' || tags === null) return false;
  return Object.keys(tags).some((name) => !ENCODER_TAG.test(name));
}

function numberOrNull(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value !== 'string') return null;
  const parsed = Number.parseFloat(value);
  return Number.isFinite(parsed) ? parsed : null;
}

/**
 * Parses `ffprobe -print_format json -show_format -show_streams -select_streams a:0`.
 * Returns a reason string instead of a probe when the file has no usable audio stream.
 */
export function parseProbeOutput(json: string): AudioProbe | { problem: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return { problem: 'ffprobe printed no readable description of the file' };
  }
  const root = parsed as {
    streams?: Array<Record<string, unknown>>;
    format?: Record<string, unknown>;
  };
  const stream = root.streams?.find((s) => s.codec_type === 'audio');
  if (!stream) return { problem: 'the file contains no audio stream' };
  const durationSec = numberOrNull(root.format?.duration) ?? numberOrNull(stream.duration);
  if (durationSec === null) return { problem: 'the duration of the audio cannot be determined' };
  const sampleRate = numberOrNull(stream.sample_rate);
  const channels = numberOrNull(stream.channels);
  if (!sampleRate || !channels) return { problem: 'the audio stream has no sample rate' };
  return {
    durationSec,
    sampleRate,
    channels,
    codec: typeof stream.codec_name === 'string' ? stream.codec_name : 'unknown',
    bitRate: numberOrNull(stream.bit_rate) ?? numberOrNull(root.format?.bit_rate),
    formatName: typeof root.format?.format_name === 'string' ? root.format.format_name : 'unknown',
    carriesMetadata:
      (numberOrNull(root.format?.nb_streams) ?? 1) > 1 ||
      hasTagsBeyondEncoder(root.format?.tags) ||
      hasTagsBeyondEncoder(stream.tags),
  };
}
