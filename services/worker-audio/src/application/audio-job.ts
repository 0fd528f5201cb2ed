import { join } from 'node:path';
import { type JobFileStore, type ProcessJob, processUploadedFile, sizeMetrics } from '@tamp/kit';
import { AUDIO_EXTENSIONS } from '@tamp/proto';
import type { FfmpegRunner } from '../adapters/ffmpeg-runner';

export interface AudioJobOptions {
  store: JobFileStore;
  audio: Pick<FfmpegRunner, 'processAudio'>;
}

/**
 * An audio job: upload → temp file → ffmpeg passes (file to file) → `result.ogg|mp3`. ffmpeg's
 * progress reports (about twice a second) extend the JetStream lease.
 */
export function createAudioJobProcessor(options: AudioJobOptions): ProcessJob<'audio'> {
  return async (work, { workDir, signal, heartbeat }) => {
    const startedAt = performance.now();
    const encode = work.operations.at(-1);
    const extension = encode?.type === 'encode' ? AUDIO_EXTENSIONS[encode.params.format] : 'audio';
    const outputPath = join(workDir, `output.${extension}`);
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
        ...sizeMetrics(audio.inputSize, audio.outputSize, startedAt),
        operationsApplied: audio.operationsApplied,
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
