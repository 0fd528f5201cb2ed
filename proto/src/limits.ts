/**
 * Sizes in the spec ("25 MB", "100 KB") are binary units: 1 MB = 1,048,576 bytes and
 * 1 KB = 1,024 bytes, for plan limits, credit costs and inline thresholds alike.
 */
export const KB = 1024;
export const MB = 1024 * 1024;

export const PIPELINES = ['audio', 'image', 'text'] as const;
export type Pipeline = (typeof PIPELINES)[number];

/** `video` is reserved by the spec: it appears in job types and usage but has no pipeline. */
export const JOB_TYPES = ['audio', 'text', 'image', 'video'] as const;
export type JobType = (typeof JOB_TYPES)[number];

export const JOB_STATUSES = ['created', 'pending', 'processing', 'completed', 'failed'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const TERMINAL_STATUSES: readonly JobStatus[] = ['completed', 'failed'];

export const LIMITS = {
  uploadUrlTtlSeconds: 900,
  uploadLifetimeMs: 24 * 60 * 60 * 1000,
  filenameLength: { min: 1, max: 255 },
  operationsPerJob: { min: 1, max: 10 },
  idempotencyKeyLength: { min: 1, max: 255 },
  idempotencyKeyTtlMs: 24 * 60 * 60 * 1000,
  inlineTextCharacters: 5_000_000,
  textFastPathBytes: 50 * KB,
  imageInlineBytes: 5 * MB,
  waitSeconds: { min: 0, max: 30 },
  listLimit: { min: 1, max: 100, default: 20 },
  attempts: 4,
  outputUrlTtlSeconds: 3600,
  resultRetentionMs: 7 * 24 * 60 * 60 * 1000,
  inlineReplyTimeoutMs: 10_000,
  /**
   * The whole budget of one job creation, set by the gateway and shared by every internal call
   * made for it (upload check, credit reservation, inline run): the answer, a 503 included,
   * comes well before a client's usual 30–60 s time-out.
   */
  createJobBudgetMs: 25_000,
  /**
   * What an image job with `format: "auto"` or an `ssim` target may spend weighing encodings
   * before it settles (services/worker-image/README.md#auto-and-perceptual-targets).
   */
  imageSearchBudgetMs: 20_000,
  webhookDeadlineMs: 10_000,
  webhookRetries: 5,
  /**
   * An account's keys travel in one internal reply and one dashboard page, so they are
   * bounded: at most this many active keys (creating another is refused until one is
   * revoked) ...
   */
  activeApiKeysPerAccount: 100,
  /** ... and, besides them, the keys revoked most recently; older revoked keys are not listed. */
  listedRevokedApiKeys: 100,
} as const;

/** Bytes covered by one credit, per pipeline (spec: "1 credit per started N MB/KB"). */
export const CREDIT_UNIT_BYTES: Record<Pipeline, number> = {
  audio: 5 * MB,
  image: 2 * MB,
  text: 100 * KB,
};

/** Credits a job costs: one per started unit of input, at least one. */
export function creditCost(pipeline: Pipeline, inputBytes: number): number {
  return Math.max(1, Math.ceil(inputBytes / CREDIT_UNIT_BYTES[pipeline]));
}
