import { type AudioOperation, splitAudioChain } from '@tamp/proto';
import {
  compressorFilter,
  type GainProbe,
  gainFilter,
  LIMITER_PROBE_OFFSETS_DB,
  levelAtOffset,
  levelGapDb,
  levelScanFilter,
  loudnessNeedsLimiter,
  offsetReachingTarget,
  preludeFilter,
  silenceCutFilter,
  silenceDetectFilter,
  speedupFilter,
} from './audio-filters';
import type { AudioOperationOf, ProcessingOperation } from './audio-operations';
import { type EncoderSettings, encoderSettings } from './encoder-settings';
import { MeasurementParseError } from './errors';
import {
  ebur128SummariesCollector,
  type LineCollector,
  type LoudnessSummary,
  type SilenceMap,
  silenceDetectCollector,
} from './measurement-parsers';

type NormalizeOperation = AudioOperationOf<'normalize'>;

/**
 * Turns a resolved chain into ffmpeg passes, one at a time: each pass measures everything that
 * can be measured with what is known so far, and once nothing is missing the last pass runs the
 * whole chain and encodes. Every ffmpeg process costs its start-up (tens of ms of CPU, more than
 * a short file's decoding), so measurements share passes:
 *
 * - silence detection and the level of the next normalisation run on the same decode; that
 *   level is taken before the cuts are known, so it is an estimate and is only used to choose
 *   where the next pass measures, never applied unmeasured;
 * - a normalisation is measured at several gains at once (asplit branches) instead of being
 *   corrected pass after pass, and each branch also measures the level the next stage (a
 *   compressor's make-up gain) will see.
 *
 * Nothing here spawns anything: a pass is built from the measurements gathered so far, and its
 * collector turns ffmpeg's log lines into new measurements.
 */

/** A stage's input level: measured on the real chain (exact) or on an approximation of it. */
export interface StageLevel {
  kind: 'level';
  exact: boolean;
  measured: LoudnessSummary;
}

/** One gain pass of a stage: the level after its gain at each offset, one branch each. */
export interface GainProbes {
  kind: 'gain-probes';
  /** The gain that closes the gap measured at the stage's input; offsets are added to it. */
  baseGainDb: number;
  limiter: boolean;
  probes: GainProbe[];
  /** In every branch, the level the next stage sees, when no measurement lies between. */
  next: { index: number; probes: GainProbe[] } | null;
}

export type PlanMeasurement = SilenceMap | StageLevel | GainProbes;
export type MeasurementMap = ReadonlyMap<string, PlanMeasurement>;

export interface FfmpegInvocation {
  filterGraph: string;
  /** null: decode, filter and discard (`-f null`), used by measurement passes. */
  output: EncoderSettings | null;
}

export interface MeasurePass {
  kind: 'measure';
  label: string;
  invocation: FfmpegInvocation;
  /** Turns the pass's stderr lines into the measurements it was built for. */
  createCollector(): LineCollector<Map<string, PlanMeasurement>>;
}

export interface EncodePass {
  kind: 'encode';
  label: string;
  invocation: FfmpegInvocation;
}

export type Pass = MeasurePass | EncodePass;

export interface AudioProcessingPlan {
  output: EncoderSettings;
  /** Operation type names in the order they run, encode last (for job metrics). */
  operationsApplied: string[];
  /** The most passes the chain can take (for progress reports); usually fewer run. */
  maxPasses: number;
  /** The next pass for what has been measured so far; the encode once nothing is missing. */
  nextPass(measurements: MeasurementMap): Pass;
}

/** A stage whose level came out wrong from a plain gain pass is probed once more, limited. */
const MAX_GAIN_ROUNDS = 2;

const measurementKey = {
  silences: (index: number) => `${index}:silences`,
  level: (index: number) => `${index}:level`,
  gains: (index: number, round: number) => `${index}:gains-${round}`,
};

/**
 * An operation that sets a level from a measurement: normalize, or the make-up gain after a
 * compressor, which restores the loudness an earlier normalize set (see
 * `compressorMakeupTargets`).
 */
interface LevelStage {
  index: number;
  /** The normalize whose target and mode apply. */
  target: NormalizeOperation;
  /** Applied before the stage's measuring point: the compressor, for make-up gain. */
  before: string | null;
  position: string;
}

type StageDecision =
  | { kind: 'apply'; filter: string | null }
  | { kind: 'measure-level' }
  | { kind: 'probe-gains'; round: number; baseGainDb: number; limiter: boolean };

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

function levelStages(processing: readonly ProcessingOperation[]): (LevelStage | null)[] {
  const makeupTargets = compressorMakeupTargets(processing);
  return processing.map((operation, index) => {
    const position = `${operation.type} #${index + 1}`;
    if (operation.type === 'normalize') return { index, target: operation, before: null, position };
    const makeupTarget = makeupTargets[index];
    if (operation.type === 'compress' && makeupTarget) {
      // Measured after the compressor, which is what the make-up gain corrects.
      return { index, target: makeupTarget, before: compressorFilter(operation), position };
    }
    return null;
  });
}

/** Filters of operations that need no measurement. */
function fixedFilter(operation: ProcessingOperation): string | null {
  if (operation.type === 'speedup') return speedupFilter(operation);
  if (operation.type === 'compress') return compressorFilter(operation);
  throw new Error(`${operation.type} needs a measurement`);
}

function gainRounds(measurements: MeasurementMap, index: number): GainProbes[] {
  const rounds: GainProbes[] = [];
  for (let round = 1; round <= MAX_GAIN_ROUNDS; round++) {
    const found = measurements.get(measurementKey.gains(index, round));
    if (found?.kind === 'gain-probes') rounds.push(found);
  }
  return rounds;
}

/** The offset a gain pass found for the stage's target. */
function chosenOffsetDb(target: NormalizeOperation, gains: GainProbes): number {
  if (!target.params.peakNormalize)
    return offsetReachingTarget(target.params.targetLevel, gains.probes);
  // Gain is linear on the peak: one branch tells the exact remaining gap.
  const peak = gains.probes[0]?.measured.peakDb ?? null;
  return peak === null ? 0 : target.params.targetLevel - peak;
}

export function buildProcessingPlan(chain: readonly AudioOperation[]): AudioProcessingPlan {
  const { processing, encode } = splitAudioChain(chain);
  const output = encoderSettings(encode);
  const stages = levelStages(processing);
  const stageCount = stages.filter((stage) => stage !== null).length;
  const trimCount = processing.filter((operation) => operation.type === 'trim-silence').length;

  /**
   * What is known about a stage's input level, best first: a plain gain pass (gain is linear,
   * so its branch gives the exact level), a direct measurement, or the level the previous
   * stage's gain pass saw in its branches, interpolated at the gain it chose (an estimate).
   */
  function stageLevel(stage: LevelStage, measurements: MeasurementMap): StageLevel | null {
    const plain = gainRounds(measurements, stage.index).findLast((round) => !round.limiter);
    if (plain) {
      return {
        kind: 'level',
        exact: true,
        measured: levelAtOffset(plain.probes, -plain.baseGainDb),
      };
    }
    const direct = measurements.get(measurementKey.level(stage.index));
    if (direct?.kind === 'level') return direct;
    for (const previous of stages.slice(0, stage.index).reverse()) {
      if (!previous) continue;
      const gains = gainRounds(measurements, previous.index).at(-1);
      if (gains?.next?.index !== stage.index) return null;
      return {
        kind: 'level',
        exact: false,
        measured: levelAtOffset(gains.next.probes, chosenOffsetDb(previous.target, gains)),
      };
    }
    return null;
  }

  function decideStage(stage: LevelStage, measurements: MeasurementMap): StageDecision {
    const rounds = gainRounds(measurements, stage.index);
    const last = rounds.at(-1);
    if (last?.limiter) {
      const gain = last.baseGainDb + chosenOffsetDb(stage.target, last);
      return { kind: 'apply', filter: gainFilter(gain, true) };
    }
    const level = stageLevel(stage, measurements);
    if (!level) return { kind: 'measure-level' };
    const gap = levelGapDb(stage.target, level.measured);
    // Silence (nothing passes the gate, or no peak) is left alone rather than amplified.
    if (gap === null) return { kind: 'apply', filter: null };
    const limiter = loudnessNeedsLimiter(stage.target, level.measured);
    if ((level.exact && !limiter) || rounds.length >= MAX_GAIN_ROUNDS) {
      return { kind: 'apply', filter: gainFilter(gap, limiter) };
    }
    return { kind: 'probe-gains', round: rounds.length + 1, baseGainDb: gap, limiter };
  }

  function nextPass(measurements: MeasurementMap): Pass {
    const pass = new PassBuilder(preludeFilter(output));
    // False once a measurement point lies past cuts not known yet: levels there are estimates.
    let exactSoFar = true;
    let complete = true;
    for (const [index, operation] of processing.entries()) {
      if (operation.type === 'trim-silence') {
        const silences = measurements.get(measurementKey.silences(index));
        if (silences?.kind === 'silences') {
          pass.apply(silenceCutFilter(operation, silences, output.sampleRate));
          continue;
        }
        complete = false;
        if (!exactSoFar) break;
        pass.detectSilences(
          silenceDetectFilter(operation),
          measurementKey.silences(index),
          `detect silences for ${operation.type} #${index + 1}`,
        );
        exactSoFar = false;
        continue;
      }
      const stage = stages[index];
      if (!stage) {
        pass.apply(fixedFilter(operation));
        continue;
      }
      pass.apply(stage.before);
      const decision = decideStage(stage, measurements);
      if (decision.kind === 'apply') {
        pass.apply(decision.filter);
        continue;
      }
      complete = false;
      if (decision.kind === 'measure-level') {
        pass.measureLevel(
          measurementKey.level(index),
          exactSoFar,
          `${exactSoFar ? 'measure' : 'estimate'} level for ${stage.position}`,
        );
        break;
      }
      if (!exactSoFar) break;
      pass.probeGains(stage, decision, continuationTo(index));
      break;
    }
    if (complete) {
      return {
        kind: 'encode',
        label: `encode ${output.format} ${output.bitrateKbps} kbit/s`,
        invocation: { filterGraph: pass.graph(), output },
      };
    }
    return pass.measurePass();
  }

  /**
   * The filters from a stage to the next stage's measuring point, when only operations that
   * need no measurement lie between (a trim in between would need its own detection pass).
   */
  function continuationTo(index: number): { stage: LevelStage; filters: string[] } | null {
    const filters: string[] = [];
    for (let later = index + 1; later < processing.length; later++) {
      const operation = processing[later]!;
      if (operation.type === 'trim-silence') return null;
      const stage = stages[later];
      if (stage) return { stage, filters: stage.before ? [...filters, stage.before] : filters };
      const filter = fixedFilter(operation);
      if (filter) filters.push(filter);
    }
    return null;
  }

  return {
    output,
    operationsApplied: [...processing.map((operation) => operation.type), encode.type],
    // Worst case, nothing shares a pass: a detection per trim, a level and two gain rounds per
    // stage, and the encode.
    maxPasses: trimCount + stageCount * (1 + MAX_GAIN_ROUNDS) + 1,
    nextPass,
  };
}

type MeasuringPoint =
  | { kind: 'silences'; key: string }
  | { kind: 'level'; key: string; exact: boolean }
  | {
      kind: 'gains';
      key: string;
      gains: Omit<GainProbes, 'probes' | 'next'>;
      offsets: number[];
      nextIndex: number | null;
    };

/**
 * One pass's filtergraph: the chain so far as one line of filters, optionally ending in
 * branches, and the measuring filters in it in the order they appear (ffmpeg numbers its
 * filters in that order, which is how their summaries are told apart).
 */
class PassBuilder {
  private readonly filters: string[];
  private branches: string[] = [];
  private readonly points: MeasuringPoint[] = [];
  private readonly labels: string[] = [];

  constructor(prelude: string) {
    this.filters = [prelude];
  }

  apply(filter: string | null): void {
    if (filter !== null) this.filters.push(filter);
  }

  detectSilences(filter: string, key: string, label: string): void {
    this.filters.push(filter);
    this.points.push({ kind: 'silences', key });
    this.labels.push(label);
  }

  measureLevel(key: string, exact: boolean, label: string): void {
    this.filters.push(levelScanFilter());
    this.points.push({ kind: 'level', key, exact });
    this.labels.push(label);
  }

  /**
   * One branch per offset, each with its gain (and limiter) and a level scan, then the chain on
   * to the next stage's measuring point and a scan there. Only the last branch feeds the pass's
   * output; the others end in `anullsink`.
   */
  probeGains(
    stage: LevelStage,
    decision: Extract<StageDecision, { kind: 'probe-gains' }>,
    next: { stage: LevelStage; filters: string[] } | null,
  ): void {
    const offsets = decision.limiter ? [...LIMITER_PROBE_OFFSETS_DB] : [0];
    this.branches = offsets.map((offset, branch) => {
      const filters = [
        gainFilter(decision.baseGainDb + offset, decision.limiter),
        levelScanFilter(),
        ...(next ? [...next.filters, levelScanFilter()] : []),
        ...(branch < offsets.length - 1 ? ['anullsink'] : []),
      ];
      return `${offsets.length > 1 ? `[gain${branch}]` : ''}${filters.join(',')}`;
    });
    this.points.push({
      kind: 'gains',
      key: measurementKey.gains(stage.index, decision.round),
      gains: { kind: 'gain-probes', baseGainDb: decision.baseGainDb, limiter: decision.limiter },
      offsets,
      nextIndex: next?.stage.index ?? null,
    });
    this.labels.push(
      `find the gain for ${stage.position} (${offsets.length} branch${offsets.length > 1 ? 'es' : ''})`,
    );
  }

  graph(): string {
    const line = this.filters.join(',');
    if (this.branches.length === 0) return line;
    if (this.branches.length === 1) return `${line},${this.branches[0]}`;
    const outputs = this.branches.map((_, branch) => `[gain${branch}]`).join('');
    return [`${line},asplit=${this.branches.length}${outputs}`, ...this.branches].join(';');
  }

  measurePass(): MeasurePass {
    const points = [...this.points];
    return {
      kind: 'measure',
      label: this.labels.join(', '),
      invocation: { filterGraph: this.graph(), output: null },
      createCollector: () => pointsCollector(points),
    };
  }
}

/** How many ebur128 summaries a measuring point reads. */
function summariesOf(point: MeasuringPoint): number {
  if (point.kind === 'silences') return 0;
  if (point.kind === 'level') return 1;
  return point.offsets.length * (point.nextIndex === null ? 1 : 2);
}

function pointsCollector(
  points: readonly MeasuringPoint[],
): LineCollector<Map<string, PlanMeasurement>> {
  const silences = silenceDetectCollector();
  const summaries = ebur128SummariesCollector();
  return {
    accept(line) {
      silences.accept(line);
      summaries.accept(line);
    },
    finish() {
      const levels = summaries.finish();
      const expected = points.reduce((sum, point) => sum + summariesOf(point), 0);
      if (levels.length !== expected) {
        throw new MeasurementParseError(
          `ffmpeg ebur128 printed ${levels.length} loudness summaries, ${expected} expected`,
        );
      }
      const found = new Map<string, PlanMeasurement>();
      for (const point of points) {
        if (point.kind === 'silences') {
          found.set(point.key, silences.finish());
        } else if (point.kind === 'level') {
          found.set(point.key, { kind: 'level', exact: point.exact, measured: levels.shift()! });
        } else {
          const probes: GainProbe[] = [];
          const nextProbes: GainProbe[] = [];
          for (const offsetDb of point.offsets) {
            probes.push({ offsetDb, measured: levels.shift()! });
            if (point.nextIndex !== null) nextProbes.push({ offsetDb, measured: levels.shift()! });
          }
          found.set(point.key, {
            ...point.gains,
            probes,
            next: point.nextIndex === null ? null : { index: point.nextIndex, probes: nextProbes },
          });
        }
      }
      return found;
    },
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
    // ffmpeg's muxers are named as the containers' extensions: ogg (Opus) and mp3.
    '-f',
    output.extension,
    asFileUrl(options.outputPath),
  );
  return args;
}
