import { type JobWorkerSettings, jobWorkerEnv, jobWorkerSettingsFrom } from '@tamp/kit';
import { z } from 'zod';

export const configSchema = z.object({
  // Audio is never processed inline: WORKER_INLINE_CONCURRENCY is unused here (4 keeps its
  // documented default).
  ...jobWorkerEnv({ concurrency: 1, inlineConcurrency: 4 }),
  /** Inputs longer than this fail at once (permanent), before any processing. */
  AUDIO_MAX_DURATION_SEC: z.coerce
    .number()
    .positive()
    .default(4 * 3600),
  /** ffmpeg binary; default: from PATH. */
  FFMPEG_PATH: z.string().min(1).optional(),
  /** ffprobe binary; default: from PATH. */
  FFPROBE_PATH: z.string().min(1).optional(),
});
export type Config = z.output<typeof configSchema>;

export interface WorkerAudioSettings {
  worker: JobWorkerSettings;
  /** Inputs longer than this fail at once (permanent), before any processing. */
  maxDurationSec: number;
  /** ffmpeg and ffprobe binaries; undefined: from PATH. */
  ffmpegPath: string | undefined;
  ffprobePath: string | undefined;
}

export function workerAudioSettingsFrom(config: Config): WorkerAudioSettings {
  return {
    worker: jobWorkerSettingsFrom(config),
    maxDurationSec: config.AUDIO_MAX_DURATION_SEC,
    ffmpegPath: config.FFMPEG_PATH,
    ffprobePath: config.FFPROBE_PATH,
  };
}
