import { z } from 'zod';
import { JOB_STATUSES, PIPELINES } from './limits';
import { AUDIO_CLASSES, audioChainSchema } from './pipelines/audio';
import { IMAGE_FORMATS, imageChainSchema } from './pipelines/image';
import { textOperationSchema } from './pipelines/text';

/**
 * Message bodies on NATS. Every receiver validates with these schemas; trace context travels in
 * NATS headers, not in bodies.
 */

const jobInput = z.discriminatedUnion('kind', [
  /** A client upload, consumed by key. */
  z.object({
    kind: z.literal('upload'),
    uploadId: z.string(),
    key: z.string(),
    size: z.number().int().nonnegative(),
    contentType: z.string(),
    filename: z.string(),
  }),
  /** Inline text too large for the fast path, stored by the job service. */
  z.object({
    kind: z.literal('stored-text'),
    key: z.string(),
    size: z.number().int().nonnegative(),
  }),
  /** Inline text small enough to travel in the message itself. */
  z.object({ kind: z.literal('text'), text: z.string() }),
]);
export type JobInput = z.infer<typeof jobInput>;

const jobCommon = {
  jobId: z.string(),
  accountId: z.string(),
  createdAt: z.iso.datetime(),
  input: jobInput,
};

/** Work published on `jobs.<pipeline>` (queued) or sent to `work.<pipeline>.inline`. */
export const jobWorkMessage = z.discriminatedUnion('pipeline', [
  z.object({
    ...jobCommon,
    pipeline: z.literal('audio'),
    operations: audioChainSchema,
  }),
  z.object({
    ...jobCommon,
    pipeline: z.literal('image'),
    operations: imageChainSchema,
  }),
  z.object({ ...jobCommon, pipeline: z.literal('text'), operations: z.array(textOperationSchema) }),
]);
export type JobWorkMessage = z.infer<typeof jobWorkMessage>;

/**
 * One encoding an image job with `format: "auto"` or an `ssim` target weighed
 * (services/worker-image/README.md#auto-and-perceptual-targets).
 */
export const imageCandidate = z.object({
  format: z.enum(IMAGE_FORMATS),
  lossless: z.boolean(),
  /** The API quality (1–100) the search settled on; absent when lossless. */
  quality: z.number().int().optional(),
  /** Size of the whole output at that setting; with `estimated`, projected from the sample. */
  bytes: z.number().int().optional(),
  estimated: z.literal(true).optional(),
  /** SSIM (luma) against the resized input, measured on the sample the search used. */
  ssim: z.number().optional(),
  meetsTarget: z.boolean().optional(),
  /**
   * Not tried: the job's time budget ran out, it could not fit the memory budget, or the
   * output is too large for the format (WebP 16383, AVIF 16384, JPEG 65535 px per side).
   */
  skipped: z.enum(['time-budget', 'memory', 'dimensions']).optional(),
});
export type ImageCandidate = z.infer<typeof imageCandidate>;

/**
 * What an audio job with `format: "auto"` heard and chose (services/worker-audio/README.md#auto):
 * the class, the measures that decided it, and the Opus settings it was encoded with.
 */
export const audioAutoChoice = z.object({
  class: z.enum(AUDIO_CLASSES),
  /** Opus' `-application`: voip (speech intelligibility) or audio (fidelity). */
  application: z.enum(['voip', 'audio']),
  bitrate: z.number().int(),
  channels: z.number().int(),
  measures: z.object({
    /** Share of 50 ms frames 20 dB or more below the loud frames: pauses. */
    pauseShare: z.number(),
    /** Mean level change from one 50 ms frame to the next, dB: syllables. */
    envelopeModulationDb: z.number(),
    /** Strongest repetition of the level envelope at a beat's period (0.25–3 s), 0–1. */
    beatRegularity: z.number(),
    /** Mean correlation of left and right, 1 when they carry the same signal. */
    stereoCorrelation: z.number(),
  }),
});
export type AudioAutoChoice = z.infer<typeof audioAutoChoice>;

export const jobMetrics = z
  .object({
    inputSize: z.number(),
    outputSize: z.number(),
    compressionRatio: z.number(),
    operationsApplied: z.array(z.string()),
    processingMs: z.number(),
    /**
     * The output is the input itself: nothing was smaller in an acceptable format at the same
     * size (docs/decisions.md#never-larger-than-the-input); compressionRatio is then 1.
     */
    keptInput: z.literal(true).optional(),
    /** Image jobs with auto or an ssim target: the target, and what the output reached. */
    ssimTarget: z.number().optional(),
    ssim: z.number().optional(),
    /** Image jobs with auto or an ssim target: each encoding weighed, the chosen one included. */
    candidates: z.array(imageCandidate).optional(),
    /** Audio jobs with auto: what the input was heard as and the encoding chosen for it. */
    audioAuto: audioAutoChoice.optional(),
  })
  .catchall(z.unknown());
export type JobMetrics = z.infer<typeof jobMetrics>;

/**
 * `inputSize / outputSize`, three decimals (4.2 means 4.2 times smaller). An empty output has no
 * finite ratio and reports 0 (docs/decisions.md#what-a-job-holds). The one rule: workers compute
 * it with this function, and the job service applies it again to what it stores, so a job never
 * holds a ratio another rule (an older worker) produced.
 */
export function compressionRatio(inputSize: number, outputSize: number): number {
  if (outputSize <= 0) return 0;
  return Math.round((inputSize / outputSize) * 1000) / 1000;
}

/** A worker's reported metrics with the ratio computed again by compressionRatio, as stored. */
export function withCompressionRatio(metrics: JobMetrics): JobMetrics {
  return { ...metrics, compressionRatio: compressionRatio(metrics.inputSize, metrics.outputSize) };
}

/** What billing counts for usage; only the pipeline's own dimension is set. */
export const usageDimensions = z.object({
  inputBytes: z.number().nonnegative(),
  audioSeconds: z.number().nonnegative().optional(),
  megapixels: z.number().nonnegative().optional(),
  characters: z.number().int().nonnegative().optional(),
});
export type UsageDimensions = z.infer<typeof usageDimensions>;

/** Published on `events.job.completed` / `events.job.failed` with dedup id `<jobId>:<event>`. */
export const jobEvent = z.object({
  event: z.enum(['job.completed', 'job.failed']),
  jobId: z.string(),
  accountId: z.string(),
  pipeline: z.enum(PIPELINES),
  status: z.enum(['completed', 'failed']),
  inline: z.boolean(),
  webhookUrl: z.string().nullable(),
  result: z.object({ outputKey: z.string().nullable(), metrics: jobMetrics }).nullable(),
  error: z.string().nullable(),
  usage: usageDimensions.nullable(),
  createdAt: z.iso.datetime(),
  completedAt: z.iso.datetime(),
});
export type JobEvent = z.infer<typeof jobEvent>;

/** Body of `notify.job.<id>`: just enough for a long-poll to re-read the job. */
export const jobNotification = z.object({ jobId: z.string(), status: z.enum(JOB_STATUSES) });
export type JobNotification = z.infer<typeof jobNotification>;

/** Body of `notify.account.<id>`: the account whose settings changed. */
export const accountNotification = z.object({ accountId: z.string() });
export type AccountNotification = z.infer<typeof accountNotification>;
