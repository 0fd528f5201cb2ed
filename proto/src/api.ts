import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from './errors';
import { JOB_STATUSES, JOB_TYPES, PIPELINES } from './limits';
import { jobMetrics } from './messages';

/** The public envelopes. Every payload of the API is wrapped in one of these. */
export const successEnvelope = <Payload extends z.ZodType>(payload: Payload) =>
  z.object({ success: z.literal(true), data: payload });

export const errorEnvelope = z.object({
  success: z.literal(false),
  error: z.object({
    code: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]),
    message: z.string(),
    details: z.unknown().optional(),
  }),
});

/** Upload (response of POST /v1/upload). */
export const publicUpload = z.object({
  id: z.string(),
  uploadUrl: z.string(),
  contentType: z.string(),
  uploadUrlExpiresIn: z.number(),
  expiresAt: z.iso.datetime(),
});
export type PublicUpload = z.infer<typeof publicUpload>;

/** Metrics as shown on a single job: the same shape the workers report (spec fields + extras). */
export const publicMetrics = jobMetrics;

export const publicResult = z.object({
  outputUrl: z.string().optional(),
  outputText: z.string().optional(),
  metrics: publicMetrics,
  /** Set once the 7-day retention has passed: the output is gone, the metrics stay. */
  expired: z.literal(true).optional(),
});

/** Job (response of job creation and of GET /v1/jobs/:id). */
export const publicJob = z.object({
  id: z.string(),
  status: z.enum(JOB_STATUSES),
  error: z.string().optional(),
  result: publicResult.optional(),
});
export type PublicJob = z.infer<typeof publicJob>;

/** Item of GET /v1/jobs: no download URL, no output text. */
export const publicJobSummary = z.object({
  id: z.string(),
  type: z.enum(JOB_TYPES),
  status: z.enum(JOB_STATUSES),
  name: z.string().optional(),
  error: z.string().optional(),
  metrics: z
    .object({ inputSize: z.number(), outputSize: z.number(), compressionRatio: z.number() })
    .optional(),
  createdAt: z.iso.datetime(),
  completedAt: z.iso.datetime().optional(),
});
export type PublicJobSummary = z.infer<typeof publicJobSummary>;

export const publicJobList = z.object({
  items: z.array(publicJobSummary),
  nextCursor: z.string().nullable(),
});

const usageOf = <Shape extends z.ZodRawShape>(shape: Shape) =>
  z.object({ requests: z.number(), inputBytes: z.number(), ...shape });

/** Usage (response of GET /v1/usage/current). */
export const publicUsage = z.object({
  period: z.object({ start: z.iso.datetime(), end: z.iso.datetime() }),
  audio: usageOf({ minutes: z.number() }),
  text: usageOf({ characters: z.number() }),
  image: usageOf({ megapixels: z.number() }),
  video: usageOf({ minutes: z.number() }),
});
export type PublicUsage = z.infer<typeof publicUsage>;

/** One preset and the chain it expands to. */
const presetEntry = z.object({
  name: z.string(),
  description: z.string(),
  operations: z.array(z.object({ type: z.string(), params: z.unknown() })),
  output: z.record(z.string(), z.unknown()),
  queued: z.boolean(),
});

/** One operation parameter: its type, range, default or allowed values. */
const parameterEntry = z.object({
  type: z.string(),
  description: z.string().optional(),
  min: z.number().optional(),
  max: z.number().optional(),
  default: z.unknown().optional(),
  enum: z.array(z.unknown()).readonly().optional(),
});

/** GET /v1/<pipeline>/presets (docs/decisions.md#jobs): each preset and its chain. */
export const publicPresetCatalogue = z.object({ presets: z.array(presetEntry) });
export type PublicPresetCatalogue = z.infer<typeof publicPresetCatalogue>;

/** GET /v1/<pipeline>/operations (docs/decisions.md#jobs): each operation's parameters. */
export const publicOperationCatalogue = z.object({
  operations: z.array(
    z.object({
      type: z.string(),
      description: z.string(),
      params: z.record(z.string(), parameterEntry),
    }),
  ),
});
export type PublicOperationCatalogue = z.infer<typeof publicOperationCatalogue>;

/**
 * The body of a webhook delivery, exactly the spec's Events payload: only the spec's three
 * metrics, `outputKey` a storage key (not a link), `result: null` on `job.failed`.
 */
export const publicWebhookEvent = z.object({
  event: z.enum(['job.completed', 'job.failed']),
  job: z.object({
    id: z.string(),
    type: z.enum(PIPELINES),
    status: z.enum(['completed', 'failed']),
    result: z
      .object({
        outputKey: z.string().nullable(),
        metrics: z.object({
          inputSize: z.number(),
          outputSize: z.number(),
          compressionRatio: z.number(),
        }),
      })
      .nullable(),
    error: z.string().nullable(),
    createdAt: z.iso.datetime(),
    completedAt: z.iso.datetime(),
  }),
});
export type PublicWebhookEvent = z.infer<typeof publicWebhookEvent>;
