import { join } from 'node:path';
import { type ObjectStore, PermanentJobError, type ProcessJob } from '@tamp/kit';
import { AUDIO_EXTENSIONS, compressionRatio, storageKeys } from '@tamp/proto';
import type { FfmpegRunner } from '../adapters/ffmpeg-runner';

export const AUDIO_CONTENT_TYPES: Record<string, string> = {
  ogg: 'audio/ogg',
  mp3: 'audio/mpeg',
};

export interface AudioJobOptions {
  store: Pick<ObjectStore, 'downloadToFile' | 'uploadFile'>;
  audio: Pick<FfmpegRunner, 'processAudio'>;
}

/**
 * An audio job: upload → temp file → ffmpeg passes (file to file) → `result.ogg|mp3`. ffmpeg's
 * progress reports (about twice a second) extend the JetStream lease.
 */
export function createAudioJobProcessor(options: AudioJobOptions): ProcessJob {
  return async (work, { workDir, signal, heartbeat }) => {
    const startedAt = performance.now();
    if (work.pipeline !== 'audio') {
      throw new PermanentJobError(`The audio worker cannot run a ${work.pipeline} job`);
    }
    if (work.input.kind !== 'upload') {
      throw new PermanentJobError('An audio job needs an uploaded file');
    }
    const encode = work.operations.at(-1);
    const extension = encode?.type === 'encode' ? AUDIO_EXTENSIONS[encode.params.format] : 'audio';
    const inputPath = join(workDir, 'input');
    const outputPath = join(workDir, `output.${extension}`);
    await options.store.downloadToFile(work.input.key, inputPath);
    heartbeat();
    const audio = await options.audio.processAudio({
      inputPath,
      outputPath,
      workDir: join(workDir, 'ffmpeg'),
      operations: work.operations,
      signal,
      onProgress: () => heartbeat(),
    });
    const outputKey = storageKeys.result(work.accountId, work.jobId, audio.extension);
    await options.store.uploadFile(
      outputKey,
      outputPath,
      AUDIO_CONTENT_TYPES[audio.extension] ?? 'application/octet-stream',
    );
    return {
      outputKey,
      outputText: null,
      metrics: {
        inputSize: audio.inputSize,
        outputSize: audio.outputSize,
        compressionRatio: compressionRatio(audio.inputSize, audio.outputSize),
        operationsApplied: audio.operationsApplied,
        processingMs: Math.round(performance.now() - startedAt),
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
