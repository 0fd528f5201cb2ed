import type { AudioOperation } from '@tamp/proto';
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
  type AudioOperationOf,
  type ProcessingOperation,
  validateResolvedChain,
} from './audio-operations';

type NormalizeOperation = AudioOperationOf<'normalize'>;

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
  makeupTarget: NormalizeOperation | null,
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
    case 'compress': {
      const compressor = compressorFilter(operation);
      if (makeupTarget === null) return compressor;
      // Make-up gain: bring the compressed signal back to the loudness the chain set earlier.
      const makeup = loudnessNormalizeFilter(
        makeupTarget,
        loudness(measurements, measurementKey.level(index)),
        corrections(measurements, index),
      );
      return makeup === null ? compressor : `${compressor},${makeup}`;
    }
    case 'speedup':
      return speedupFilter(operation);
  }
}

/**
 * A compressor lowers integrated loudness; after a loudness normalize earlier in the chain
 * (every preset that compresses has one) it restores that target as make-up gain, so a preset's
 * output lands at its stated level. Without an earlier loudness target the compressor is left
 * as the user asked.
 */
export function compressorMakeupTargets(
  processing: readonly ProcessingOperation[],
): (NormalizeOperation | null)[] {
  let target: NormalizeOperation | null = null;
  return processing.map((operation) => {
    if (operation.type === 'normalize') target = operation.params.peakNormalize ? null : operation;
    return operation.type === 'compress' ? target : null;
  });
}

export function buildProcessingPlan(chain: readonly AudioOperation[]): AudioProcessingPlan {
  const { processing, encode } = validateResolvedChain(chain);
  const output = encoderSettings(encode);
  const makeupTargets = compressorMakeupTargets(processing);

  const graph = (upTo: number, measurements: MeasurementMap, ...tail: (string | null)[]) =>
    [
      preludeFilter(output),
      ...processing
        .slice(0, upTo)
        .map((operation, index) =>
          appliedFilter(operation, index, measurements, output, makeupTargets[index] ?? null),
        ),
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
    const makeupTarget = makeupTargets[index] ?? null;
    if (operation.type === 'compress' && makeupTarget !== null) {
      // Measured after the compressor, which is what the make-up gain corrects.
      pushLoudnessSteps(index, position, makeupTarget, compressorFilter(operation));
      return;
    }
    if (operation.type !== 'normalize') return;
    if (operation.params.peakNormalize) {
      steps.push(levelStep(index, position, null));
      return;
    }
    pushLoudnessSteps(index, position, operation, null);
  });

  function levelStep(
    index: number,
    position: string,

    preFilter: string | null,
  ): MeasureStep {
    return {
      kind: 'measure',
      key: measurementKey.level(index),
      label: `measure level for ${position}`,
      shouldRun: () => true,
      invocation: (m) => ({
        filterGraph: graph(index, m, preFilter, levelScanFilter()),
        output: null,
      }),
      createCollector: ebur128SummaryCollector,
    };
  }

  /**
   * A level pass, then up to MAX_LOUDNESS_CORRECTIONS passes that measure what actually came
   * out: the limiter that keeps peaks under the ceiling also lowers loudness, and its
   * shortfall is added to the gain.
   */
  function pushLoudnessSteps(
    index: number,
    position: string,
    target: NormalizeOperation,
    preFilter: string | null,
  ): void {
    steps.push(levelStep(index, position, preFilter));
    for (let round = 1; round <= MAX_LOUDNESS_CORRECTIONS; round++) {
      steps.push({
        kind: 'measure',
        key: measurementKey.correction(index, round),
        label: `correct loudness for ${position} (round ${round})`,
        shouldRun: (m) => {
          const measured = loudness(m, measurementKey.level(index));
          if (!loudnessNeedsLimiter(target, measured)) return false;
          if (round === 1) return true;
          const previous = m.get(measurementKey.correction(index, round - 1));
          if (previous?.kind !== 'loudness' || previous.integratedLufs === null) return false;
          return (
            Math.abs(target.params.targetLevel - previous.integratedLufs) > LOUDNESS_TOLERANCE_LU
          );
        },
        invocation: (m) => ({
          filterGraph: graph(index + 1, m, levelScanFilter()),
          output: null,
        }),
        createCollector: ebur128SummaryCollector,
      });
    }
  }

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
