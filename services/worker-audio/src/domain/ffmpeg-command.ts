import {
  compressorFilter,
  LOUDNESS_TOLERANCE_LU,
  levelScanFilter,
  loudnessNeedsLimiter,
  loudnessNormalizeFilter,
  peakNormalizeFilter,
  preludeFilter,
  silenceCutFilter,
  silenceDetectFilter,
  speedupFilter,
} from './audio-filters';
import {
  type ProcessingOperation,
  type ResolvedAudioOperation,
  validateResolvedChain,
} from './audio-operations';
import { type EncoderSettings, encoderSettings } from './encoder-settings';
import {
  ebur128SummaryCollector,
  type LineCollector,
  type LoudnessSummary,
  type Measurement,
  type SilenceMap,
  silenceDetectCollector,
} from './measurement-parsers';

/**
 * Turns a resolved chain into a plan of ffmpeg passes. Operations that need to know the
 * signal first (trim-silence, normalize) get a measurement pass that runs every earlier
 * operation and then a measuring filter; the final pass runs the whole chain and encodes.
 * Nothing here spawns anything: a step turns the measurements gathered so far into an
 * invocation, and a collector turns ffmpeg's log lines into the next measurement.
 */

export type MeasurementMap = ReadonlyMap<string, Measurement>;

export interface FfmpegInvocation {
  filterGraph: string;
  /** null: decode, filter and discard (`-f null`), used by measurement passes. */
  output: EncoderSettings | null;
}

export interface MeasureStep {
  kind: 'measure';
  key: string;
  label: string;
  /** Some passes are only needed depending on earlier measurements. */
  shouldRun(measurements: MeasurementMap): boolean;
  invocation(measurements: MeasurementMap): FfmpegInvocation;
  createCollector(): LineCollector<Measurement>;
}

export interface EncodeStep {
  kind: 'encode';
  label: string;
  invocation(measurements: MeasurementMap): FfmpegInvocation;
}

export type PlanStep = MeasureStep | EncodeStep;

export interface AudioProcessingPlan {
  steps: readonly PlanStep[];
  output: EncoderSettings;
  /** Operation type names in the order they run, encode last (for job metrics). */
  operationsApplied: string[];
}

/** Loudness normalisation behind a limiter is re-measured and corrected up to this often. */
const MAX_LOUDNESS_CORRECTIONS = 2;

const measurementKey = {
  silences: (index: number) => `${index}:silences`,
  level: (index: number) => `${index}:level`,
  correction: (index: number, round: number) => `${index}:correction-${round}`,
};

class MissingMeasurementError extends Error {
  constructor(key: string) {
    super(`measurement ${key} is needed before this pass can be built`);
    this.name = 'MissingMeasurementError';
  }
}

function loudness(measurements: MeasurementMap, key: string): LoudnessSummary {
  const found = measurements.get(key);
  if (found?.kind !== 'loudness') throw new MissingMeasurementError(key);
  return found;
}

function silences(measurements: MeasurementMap, key: string): SilenceMap {
  const found = measurements.get(key);
  if (found?.kind !== 'silences') throw new MissingMeasurementError(key);
  return found;
}

function corrections(measurements: MeasurementMap, index: number): LoudnessSummary[] {
  const found: LoudnessSummary[] = [];
  for (let round = 1; round <= MAX_LOUDNESS_CORRECTIONS; round++) {
    const measured = measurements.get(measurementKey.correction(index, round));
    if (measured?.kind === 'loudness') found.push(measured);
  }
  return found;
}

function appliedFilter(
  operation: ProcessingOperation,
  index: number,
  measurements: MeasurementMap,
  output: EncoderSettings,
): string | null {
  switch (operation.type) {
    case 'trim-silence':
      return silenceCutFilter(
        operation,
        silences(measurements, measurementKey.silences(index)),
        output.sampleRate,
      );
    case 'normalize': {
      const measured = loudness(measurements, measurementKey.level(index));
      return operation.params.peakNormalize
        ? peakNormalizeFilter(operation, measured)
        : loudnessNormalizeFilter(operation, measured, corrections(measurements, index));
    }
    case 'compress':
      return compressorFilter(operation);
    case 'speedup':
      return speedupFilter(operation);
  }
}

export function buildProcessingPlan(chain: readonly ResolvedAudioOperation[]): AudioProcessingPlan {
  const { processing, encode } = validateResolvedChain(chain);
  const output = encoderSettings(encode);

  const graph = (upTo: number, measurements: MeasurementMap, ...tail: (string | null)[]) =>
    [
      preludeFilter(output),
      ...processing
        .slice(0, upTo)
        .map((operation, index) => appliedFilter(operation, index, measurements, output)),
      ...tail,
    ]
      .filter((fragment): fragment is string => fragment !== null)
      .join(',');

  const steps: PlanStep[] = [];
  processing.forEach((operation, index) => {
    const position = `${operation.type} #${index + 1}`;
    if (operation.type === 'trim-silence') {
      steps.push({
        kind: 'measure',
        key: measurementKey.silences(index),
        label: `detect silences for ${position}`,
        shouldRun: () => true,
        invocation: (m) => ({
          filterGraph: graph(index, m, silenceDetectFilter(operation)),
          output: null,
        }),
        createCollector: silenceDetectCollector,
      });
    }
    if (operation.type !== 'normalize') return;
    steps.push({
      kind: 'measure',
      key: measurementKey.level(index),
      label: `measure level for ${position}`,
      shouldRun: () => true,
      invocation: (m) => ({ filterGraph: graph(index, m, levelScanFilter()), output: null }),
      createCollector: ebur128SummaryCollector,
    });
    if (operation.params.peakNormalize) return;
    // The limiter that keeps peaks under the ceiling also lowers loudness; measure what
    // actually came out and add the shortfall to the gain.
    for (let round = 1; round <= MAX_LOUDNESS_CORRECTIONS; round++) {
      steps.push({
        kind: 'measure',
        key: measurementKey.correction(index, round),
        label: `correct loudness for ${position} (round ${round})`,
        shouldRun: (m) => {
          const measured = loudness(m, measurementKey.level(index));
          if (!loudnessNeedsLimiter(operation, measured)) return false;
          if (round === 1) return true;
          const previous = m.get(measurementKey.correction(index, round - 1));
          if (previous?.kind !== 'loudness' || previous.integratedLufs === null) return false;
          return (
            Math.abs(operation.params.targetLevel - previous.integratedLufs) > LOUDNESS_TOLERANCE_LU
          );
        },
        invocation: (m) => ({
          filterGraph: graph(index + 1, m, levelScanFilter()),
          output: null,
        }),
        createCollector: ebur128SummaryCollector,
      });
    }
  });
  steps.push({
    kind: 'encode',
    label: `encode ${output.format} ${output.bitrateKbps} kbit/s`,
    invocation: (m) => ({ filterGraph: graph(processing.length, m), output }),
  });

  return {
    steps,
    output,
    operationsApplied: [...processing.map((operation) => operation.type), encode.type],
  };
}

export interface RenderOptions {
  inputPath: string;
  /** Required when the invocation encodes. */
  outputPath?: string;
  /** When set, the filtergraph is read from this file (long graphs exceed argv limits). */
  filterScriptPath?: string;
  /** Demuxers ffmpeg may use for the input (`-format_whitelist`). */
  allowedInputFormats?: readonly string[];
  /** Hard cap on decoded input seconds, a backstop in case the header lied about duration. */
  maxInputSec?: number;
  /** Emit `-progress pipe:1` key=value blocks on stdout. */
  progress?: boolean;
}

/**
 * Paths are passed with the `file:` protocol so a name can never be read as an option or as
 * another protocol (`http:`, `concat:` …).
 */
export function asFileUrl(path: string): string {
  return `file:${path}`;
}

export function renderFfmpegArgs(invocation: FfmpegInvocation, options: RenderOptions): string[] {
  const args = ['-nostdin', '-hide_banner', '-nostats', '-y'];
  if (options.progress) args.push('-progress', 'pipe:1');
  if (options.allowedInputFormats?.length) {
    args.push('-format_whitelist', options.allowedInputFormats.join(','));
  }
  if (options.maxInputSec !== undefined) args.push('-t', String(options.maxInputSec));
  args.push('-i', asFileUrl(options.inputPath), '-map', '0:a:0', '-map_metadata', '-1');
  if (options.filterScriptPath) args.push('-filter_script:a', options.filterScriptPath);
  else args.push('-af', invocation.filterGraph);

  const output = invocation.output;
  if (!output) {
    args.push('-f', 'null', '-');
    return args;
  }
  if (!options.outputPath) throw new Error('an encoding pass needs an output path');
  args.push(
    '-c:a',
    output.codec,
    '-b:a',
    `${output.bitrateKbps}k`,
    '-ac',
    String(output.channels),
    '-ar',
    String(output.sampleRate),
    ...output.codecOptions,
    '-f',
    output.format === 'opus' ? 'ogg' : 'mp3',
    asFileUrl(options.outputPath),
  );
  return args;
}
