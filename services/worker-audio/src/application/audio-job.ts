import { join } from 'node:path';
import { type JobFileStore, type ProcessJob, processUploadedFile, sizeMetrics } from '@tamp/kit';
import type { FfmpegRunner } from '../adapters/ffmpeg-runner';

export interface AudioJobOptions {
  store: JobFileStore;
  audio: Pick<FfmpegRunner, 'processAudio'>;
}

/**
 * An audio job: upload → temp file → ffmpeg passes (file to file) → `result.ogg|mp3`. ffmpeg's
 * progress reports (about twice a second) extend the JetStream lease. The extension is the
 * format processAudio wrote: for auto Opus, or the input's MP3 when the input itself is the result.
 */
export function createAudioJobProcessor(options: AudioJobOptions): ProcessJob<'audio'> {
  return async (work, { workspace, signal, heartbeat }) => {
    const workDir = await workspace();
    const startedAt = performance.now();
    const outputPath = join(workDir, 'output');
    const { outputKey, result: audio } = await processUploadedFile(
      options.store,
      work,
      { workDir, outputPath },
      (inputPath) => {
        heartbeat();
        return options.audio.processAudio({
          inputPath,
          outputPath,
          workDir: join(workDir, 'ffmpeg'),
          operations: work.operations,
          signal,
          onProgress: () => heartbeat(),
        });
      },
    );
    return {
      outputKey,
      outputText: null,
      metrics: {
        ...sizeMetrics(audio.inputSize, audio.outputSize, startedAt, audio.keptInput),
        operationsApplied: audio.operationsApplied,
        format: audio.format,
        ...(audio.auto !== undefined && { audioAuto: audio.auto }),
        durationInSec: round3(audio.durationInSec),
        durationOutSec: round3(audio.durationOutSec),
        ...(audio.integratedLufsOut !== undefined && {
          loudnessLufsOut: round1(audio.integratedLufsOut),
        }),
        ...(audio.truePeakDbOut !== undefined && { truePeakDbOut: round1(audio.truePeakDbOut) }),
      },
      usage: { inputBytes: audio.inputSize, audioSeconds: audio.durationInSec },
    };
  };
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}
