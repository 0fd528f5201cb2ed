import { randomUUID } from 'node:crypto';
import { copyFile, mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { keepInputWhenNotSmaller } from '@tamp/kit';
import {
  AUDIO_AUTO_ENCODINGS,
  AUDIO_EXTENSIONS,
  AUTO_AUDIO_FORMAT,
  type AudioAutoChoice,
  type AudioFormat,
  type AudioOperation,
  splitAudioChain,
} from '@tamp/proto';
import {
  type AnalysisFrame,
  analysisFramesCollector,
  chooseAutoEncoding,
  chosenEncode,
  contentAnalysisFilter,
} from '../domain/auto-encoding';
import {
  AudioProcessingError,
  AudioTooLongError,
  InvalidAudioInputError,
  MeasurementFailedError,
  MeasurementParseError,
  ToolFailedError,
} from '../domain/errors';
import {
  asFileUrl,
  buildProcessingPlan,
  type FfmpegInvocation,
  type PlanMeasurement,
  renderFfmpegArgs,
} from '../domain/ffmpeg-command';
import { createProgressParser, type ProgressSnapshot } from '../domain/ffmpeg-progress';
import {
  type AudioProbe,
  ebur128SummaryCollector,
  type LineCollector,
  parseProbeOutput,
} from '../domain/measurement-parsers';
import { keepInputFacts } from '../domain/never-larger';
import { runTool } from './tool-process';

export interface FfmpegRunnerOptions {
  /** Default: `ffmpeg` from PATH (the service passes its FFMPEG_PATH setting). */
  ffmpegPath?: string;
  /** Default: `ffprobe` from PATH (the service passes its FFPROBE_PATH setting). */
  ffprobePath?: string;
  /** Inputs longer than this are rejected before any processing. Default: no limit. */
  maxDurationSec?: number;
  /**
   * Demuxers allowed for job inputs. The API accepts .wav and .mp3 only; refusing every other
   * container keeps ffmpeg's playlist/concat demuxers (which open further files) out of reach.
   */
  allowedInputFormats?: readonly string[];
  /** Characters of stderr kept for error messages. Default 64 Ki. */
  stderrTailChars?: number;
}

export interface LoudnessMeasurement {
  /** EBU R128 integrated loudness, LUFS; null for silence. */
  integratedLufs: number | null;
  /** dBTP; null for digital silence. */
  truePeakDb: number | null;
  /** EBU R128 loudness range, LU; null when not measurable. */
  loudnessRangeLu: number | null;
}

export interface AudioProgress {
  /** 1-based index of the running ffmpeg pass. */
  pass: number;
  /** Upper bound: some correction passes are skipped when not needed. */
  passCount: number;
  label: string;
  /** Output seconds produced by this pass so far. */
  outTimeSec: number;
  speed: number | null;
}

export interface ProcessAudioRequest {
  inputPath: string;
  outputPath: string;
  /** Resolved chain: processing operations in order, exactly one encode last. */
  operations: readonly AudioOperation[];
  /** Scratch directory for the partial output and long filter scripts; created if missing. */
  workDir: string;
  signal?: AbortSignal;
  /** Called on every ffmpeg progress report (about twice a second): send heartbeats here. */
  onProgress?: (progress: AudioProgress) => void;
  /** Overrides the runner's maxDurationSec for this call. */
  maxDurationSec?: number;
  /** Measure the output's loudness for the job metrics (one extra decode). Default true. */
  measureOutputLoudness?: boolean;
}

export interface ProcessAudioResult {
  durationInSec: number;
  durationOutSec: number;
  inputSize: number;
  outputSize: number;
  integratedLufsOut?: number;
  truePeakDbOut?: number;
  /** The result's format: the encoder's, or the input's own when it was kept. */
  format: AudioFormat;
  extension: 'ogg' | 'mp3';
  operationsApplied: string[];
  /** ffmpeg passes that actually ran (the auto analysis, measurements, the encode). */
  passes: number;
  /** The output is the input's own bytes: the encoding was not smaller (never larger). */
  keptInput?: true;
  /** `format: "auto"`: what the input was heard as and the encoding chosen for it. */
  auto?: AudioAutoChoice;
}

export interface FfmpegRunner {
  probeAudio(path: string, options?: ProbeOptions): Promise<AudioProbe>;
  measureLoudness(path: string, options?: { signal?: AbortSignal }): Promise<LoudnessMeasurement>;
  /** Highest sample value in dBFS (null for digital silence). */
  measureSamplePeakDb(path: string, options?: { signal?: AbortSignal }): Promise<number | null>;
  /**
   * The auto analysis (domain/auto-encoding.ts) on a file: one level and stereo-correlation
   * reading per 50 ms frame.
   */
  analyseContent(path: string, options: AnalysisOptions): Promise<AnalysisFrame[]>;
  processAudio(request: ProcessAudioRequest): Promise<ProcessAudioResult>;
}

export interface AnalysisOptions {
  /** The file's sample rate (probeAudio): frames are counted in samples. */
  sampleRate: number;
  signal?: AbortSignal;
  /** Restrict demuxers (job inputs); default: any. */
  allowedFormats?: readonly string[];
  /** Decode at most this many seconds. */
  maxInputSec?: number;
  /** Called on every ffmpeg progress report (about twice a second). */
  onProgress?: (snapshot: ProgressSnapshot) => void;
}

export interface ProbeOptions {
  signal?: AbortSignal;
  /** Restrict demuxers; default: any (use for files this service wrote itself). */
  allowedFormats?: readonly string[];
}

const DEFAULT_INPUT_FORMATS = ['wav', 'mp3'] as const;

/** What an auto encode is planned as until the analysis has chosen (any encoding would do). */
const PROVISIONAL_AUTO = AUDIO_AUTO_ENCODINGS.speech;

/** Filtergraphs longer than this go through a script file (Linux caps one argv string at 128 KiB). */
const MAX_INLINE_FILTERGRAPH_CHARS = 32 * 1024;

/** Phrases with which ffmpeg says the bytes are not what the header promised. */
const CORRUPT_INPUT_PATTERN =
  /Invalid data found when processing input|could not find codec parameters|Error while decoding|Header missing|moov atom not found/i;

export function createFfmpegRunner(options: FfmpegRunnerOptions = {}): FfmpegRunner {
  const ffmpeg = options.ffmpegPath ?? 'ffmpeg';
  const ffprobe = options.ffprobePath ?? 'ffprobe';
  const inputFormats = options.allowedInputFormats ?? DEFAULT_INPUT_FORMATS;
  const tailChars = options.stderrTailChars;

  async function probeAudio(path: string, probe: ProbeOptions = {}): Promise<AudioProbe> {
    const args = ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams'];
    if (probe.allowedFormats?.length)
      args.push('-format_whitelist', probe.allowedFormats.join(','));
    args.push('-select_streams', 'a:0', asFileUrl(path));
    let stdout: string;
    try {
      ({ stdout } = await runTool(ffprobe, args, { signal: probe.signal, tailChars }));
    } catch (error) {
      if (error instanceof ToolFailedError) {
        throw new InvalidAudioInputError(describeProbeFailure(error.stderrTail), error.stderrTail);
      }
      throw error;
    }
    const parsed = parseProbeOutput(stdout);
    if ('problem' in parsed) throw new InvalidAudioInputError(parsed.problem);
    return parsed;
  }

  async function scanLevels(path: string, peak: 'true' | 'sample', signal?: AbortSignal) {
    const collector = ebur128SummaryCollector();
    const args = [
      '-nostdin',
      '-hide_banner',
      '-nostats',
      '-i',
      asFileUrl(path),
      '-map',
      '0:a:0',
      '-af',
      `ebur128=peak=${peak}:framelog=verbose`,
      '-f',
      'null',
      '-',
    ];
    const run = await runTool(ffmpeg, args, {
      signal,
      tailChars,
      onStderrLine: (line) => collector.accept(line),
    });
    try {
      return collector.finish();
    } catch (error) {
      if (error instanceof MeasurementParseError) {
        throw new MeasurementFailedError('loudness scan', error.message, run.stderr);
      }
      throw error;
    }
  }

  async function measureLoudness(path: string, scan: { signal?: AbortSignal } = {}) {
    const summary = await scanLevels(path, 'true', scan.signal);
    return {
      integratedLufs: summary.integratedLufs,
      truePeakDb: summary.peakDb,
      loudnessRangeLu: summary.loudnessRangeLu,
    };
  }

  async function measureSamplePeakDb(path: string, scan: { signal?: AbortSignal } = {}) {
    return (await scanLevels(path, 'sample', scan.signal)).peakDb;
  }

  async function analyseContent(path: string, analysis: AnalysisOptions): Promise<AnalysisFrame[]> {
    const collector = analysisFramesCollector();
    const progress = createProgressParser();
    const args = renderFfmpegArgs(
      { filterGraph: contentAnalysisFilter(analysis.sampleRate), output: null },
      {
        inputPath: path,
        allowedInputFormats: analysis.allowedFormats,
        maxInputSec: analysis.maxInputSec,
        progress: true,
      },
    );
    const run = await runTool(ffmpeg, args, {
      signal: analysis.signal,
      tailChars,
      onStderrLine: (line) => collector.accept(line),
      onStdoutLine: (line) => {
        const snapshot = progress.accept(line);
        if (snapshot) analysis.onProgress?.(snapshot);
      },
    });
    const frames = collector.finish();
    if (frames.length === 0) {
      throw new MeasurementFailedError('auto analysis', 'ffmpeg printed no frame', run.stderr);
    }
    return frames;
  }

  /** auto: the analysis pass over a job's input and the encoding chosen from what it heard. */
  async function hearAndChoose(
    inputPath: string,
    input: AudioProbe,
    analysis: Omit<AnalysisOptions, 'allowedFormats' | 'sampleRate'>,
  ): Promise<AudioAutoChoice> {
    const frames = await analyseContent(inputPath, {
      ...analysis,
      sampleRate: input.sampleRate,
      allowedFormats: inputFormats,
    });
    return chooseAutoEncoding(frames, input.channels);
  }

  async function processAudio(request: ProcessAudioRequest): Promise<ProcessAudioResult> {
    const { inputPath, outputPath, workDir, signal, onProgress } = request;
    const maxDurationSec = request.maxDurationSec ?? options.maxDurationSec;
    const maxInputSec = maxDurationSec === undefined ? undefined : maxDurationSec + 1;
    // An invalid chain fails before any process is spawned; an auto encode is planned once the
    // analysis has chosen it (every pass's prelude depends on the channels it chooses).
    const { processing, encode } = splitAudioChain(request.operations);
    const auto = encode.params.format === AUTO_AUDIO_FORMAT;
    // Provisional for auto (the speech encoding): it checks the chain and counts its passes,
    // which do not depend on the encoding.
    let plan = buildProcessingPlan(
      auto ? [...processing, chosenEncode(PROVISIONAL_AUTO)] : request.operations,
    );
    const analysisPasses = auto ? 1 : 0;
    const passCount = plan.maxPasses + analysisPasses;

    const inputSize = (await stat(inputPath)).size;
    const input = await probeAudio(inputPath, { signal, allowedFormats: inputFormats });
    if (maxDurationSec !== undefined && input.durationSec > maxDurationSec) {
      throw new AudioTooLongError(input.durationSec, maxDurationSec);
    }

    let choice: AudioAutoChoice | undefined;
    if (auto) {
      choice = await hearAndChoose(inputPath, input, {
        signal,
        maxInputSec,
        onProgress: (snapshot) =>
          onProgress?.({
            pass: 1,
            passCount,
            label: 'auto: hear speech or music',
            outTimeSec: snapshot.outTimeSec,
            speed: snapshot.speed,
          }),
      });
      plan = buildProcessingPlan([...processing, chosenEncode(choice)]);
    }
    let passes = analysisPasses;

    await mkdir(workDir, { recursive: true });
    const runId = randomUUID();
    const partialOutput = join(workDir, `${runId}.partial.${plan.output.extension}`);
    const scratchFiles: string[] = [partialOutput];
    const measurements = new Map<string, PlanMeasurement>();

    const runPass = async (
      label: string,
      invocation: FfmpegInvocation,
      collector: LineCollector<unknown> | null,
    ) => {
      passes += 1;
      const pass = passes;
      let filterScriptPath: string | undefined;
      if (invocation.filterGraph.length > MAX_INLINE_FILTERGRAPH_CHARS) {
        filterScriptPath = join(workDir, `${runId}.filter-${pass}.txt`);
        scratchFiles.push(filterScriptPath);
        await writeFile(filterScriptPath, invocation.filterGraph);
      }
      const args = renderFfmpegArgs(invocation, {
        inputPath,
        outputPath: partialOutput,
        filterScriptPath,
        allowedInputFormats: inputFormats,
        // Backstop for a header that under-reports the duration: never decode far past it.
        maxInputSec,
        progress: true,
      });
      const progress = createProgressParser();
      try {
        return await runTool(ffmpeg, args, {
          signal,
          tailChars,
          onStderrLine: collector ? (line) => collector.accept(line) : undefined,
          onStdoutLine: (line) => {
            const snapshot = progress.accept(line);
            if (snapshot && onProgress) {
              onProgress({
                pass,
                passCount,
                label,
                outTimeSec: snapshot.outTimeSec,
                speed: snapshot.speed,
              });
            }
          },
        });
      } catch (error) {
        if (error instanceof ToolFailedError && CORRUPT_INPUT_PATTERN.test(error.stderrTail)) {
          throw new InvalidAudioInputError(lastMeaningfulLine(error.stderrTail), error.stderrTail);
        }
        throw error;
      }
    };

    try {
      let encoded = false;
      // Bounded: every measurement pass adds a measurement the next pass no longer needs.
      for (let attempt = 0; attempt < plan.maxPasses && !encoded; attempt++) {
        const pass = plan.nextPass(measurements);
        if (pass.kind === 'encode') {
          await runPass(pass.label, pass.invocation, null);
          encoded = true;
          continue;
        }
        const collector = pass.createCollector();
        const run = await runPass(pass.label, pass.invocation, collector);
        try {
          for (const [key, measured] of collector.finish()) measurements.set(key, measured);
        } catch (error) {
          if (error instanceof MeasurementParseError) {
            throw new MeasurementFailedError(pass.label, error.message, run.stderr);
          }
          throw error;
        }
      }
      if (!encoded) throw new Error(`no encode pass within ${plan.maxPasses} passes`);
      await moveFile(partialOutput, outputPath);
    } finally {
      await Promise.all(scratchFiles.map((file) => rm(file, { force: true })));
    }

    // Never larger (docs/decisions.md#never-larger-than-the-input): maybe the input is the result.
    const encodedSize = (await stat(outputPath)).size;
    const kept = await keepInputWhenNotSmaller(
      { inputPath, outputPath },
      keepInputFacts({ input, processing, encode, inputSize, outputSize: encodedSize }),
    );
    // A kept input was probed already.
    const output = kept === null ? await probeAudio(outputPath, { signal }) : input;
    const outputSize = kept?.outputSize ?? encodedSize;
    const loudness =
      request.measureOutputLoudness === false
        ? null
        : await measureLoudness(outputPath, { signal });

    return {
      durationInSec: input.durationSec,
      durationOutSec: output.durationSec,
      inputSize,
      outputSize,
      ...(loudness?.integratedLufs != null && { integratedLufsOut: loudness.integratedLufs }),
      ...(loudness?.truePeakDb != null && { truePeakDbOut: loudness.truePeakDb }),
      format: kept?.format ?? plan.output.format,
      extension: kept === null ? plan.output.extension : AUDIO_EXTENSIONS[kept.format],
      operationsApplied: plan.operationsApplied,
      passes,
      ...(kept !== null && { keptInput: kept.keptInput }),
      ...(choice !== undefined && { auto: choice }),
    };
  }

  return { probeAudio, measureLoudness, measureSamplePeakDb, analyseContent, processAudio };
}

/** Rename when possible; across filesystems (workDir on another volume) copy instead. */
async function moveFile(from: string, to: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
    await copyFile(from, to);
    await rm(from, { force: true });
  }
}

function lastMeaningfulLine(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
  return lines.at(-1) ?? 'ffprobe could not read the file';
}

function describeProbeFailure(stderr: string): string {
  if (/not on whitelist/i.test(stderr)) return 'the container format is not WAV or MP3';
  if (/Invalid data found/i.test(stderr)) return 'the data is not a recognisable audio format';
  if (/No such file or directory/i.test(stderr)) return 'the file does not exist';
  return lastMeaningfulLine(stderr);
}

export type { AudioProbe };
export { AudioProcessingError };
