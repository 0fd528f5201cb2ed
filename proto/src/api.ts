import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from './errors';
import { JOB_STATUSES, JOB_TYPES, PIPELINES } from './limits';
import { jobMetrics } from './messages';

/**
 * The public envelopes. Every payload of the API is wrapped in one of these.
 *
 * A schema with a `meta({ id })` is named in the OpenAPI document (`components.schemas`, where
 * generated clients take their type names from) and referred to wherever it is used; request
 * bodies get the suffix `Input` there (fastify-type-provider-zod's rule for input schemas).
 */
export const successEnvelope = <Payload extends z.ZodType>(payload: Payload) =>
  z.object({ success: z.literal(true), data: payload });

export const errorEnvelope = z
  .object({
    success: z.literal(false),
    error: z.object({
      code: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]),
      message: z.string(),
      details: z.unknown().optional(),
    }),
  })
  .meta({
    id: 'ErrorEnvelope',
    description:
      'Every failed answer: `error.code` is one of the error codes, `details` is per code',
  });

/** Upload (response of POST /v1/upload). */
export const publicUpload = z
  .object({
    id: z.string(),
    uploadUrl: z.string(),
    contentType: z.string(),
    uploadUrlExpiresIn: z.number(),
    expiresAt: z.iso.datetime(),
  })
  .meta({
    id: 'Upload',
    description: 'A presigned upload: PUT the file to uploadUrl with exactly contentType',
  });
export type PublicUpload = z.infer<typeof publicUpload>;

/** Metrics as shown on a single job: the same shape the workers report (spec fields + extras). */
export const publicMetrics = jobMetrics.meta({
  id: 'JobMetrics',
  description:
    "The spec's five fields, plus what helps per pipeline (audio durations and loudness, image dimensions, text tokensIn/tokensOut)",
});

export const publicResult = z
  .object({
    outputUrl: z.string().optional(),
    outputText: z.string().optional(),
    metrics: publicMetrics,
    /** Set once the 7-day retention has passed: the output is gone, the metrics stay. */
    expired: z.literal(true).optional(),
  })
  .meta({
    id: 'JobResult',
    description: 'outputUrl (signed, 1 hour) or outputText, and metrics; expired after 7 days',
  });

/** Job (response of job creation and of GET /v1/jobs/:id). */
export const publicJob = z
  .object({
    id: z.string(),
    status: z.enum(JOB_STATUSES),
    error: z.string().optional(),
    result: publicResult.optional(),
  })
  .meta({
    id: 'Job',
    description: 'A job: error only when failed, result once completed',
  });
export type PublicJob = z.infer<typeof publicJob>;

/** Item of GET /v1/jobs: no download URL, no output text. */
export const publicJobSummary = z
  .object({
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
  })
  .meta({
    id: 'JobSummary',
    description: 'A job in a list: no download URL and no output text',
  });
export type PublicJobSummary = z.infer<typeof publicJobSummary>;

/** A page of GET /v1/jobs: `nextCursor` is the next page's `cursor`, null on the last page. */
export const publicJobList = z
  .object({ items: z.array(publicJobSummary), nextCursor: z.string().nullable() })
  .meta({
    id: 'JobList',
    description: 'One page of jobs, newest first; nextCursor is null on the last page',
  });

const usageOf = <Shape extends z.ZodRawShape>(shape: Shape) =>
  z.object({ requests: z.number(), inputBytes: z.number(), ...shape });

/** Usage (response of GET /v1/usage/current). */
export const publicUsage = z
  .object({
    period: z.object({ start: z.iso.datetime(), end: z.iso.datetime() }),
    audio: usageOf({ minutes: z.number() }),
    text: usageOf({ characters: z.number() }),
    image: usageOf({ megapixels: z.number() }),
    video: usageOf({ minutes: z.number() }),
  })
  .meta({
    id: 'Usage',
    description: 'Jobs completed in the current billing period, per pipeline (video: always zeros)',
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
export const publicPresetCatalogue = z.object({ presets: z.array(presetEntry) }).meta({
  id: 'PresetCatalogue',
  description: "A pipeline's presets and the chains they expand to",
});
export type PublicPresetCatalogue = z.infer<typeof publicPresetCatalogue>;

/** GET /v1/<pipeline>/operations (docs/decisions.md#jobs): each operation's parameters. */
export const publicOperationCatalogue = z
  .object({
    operations: z.array(
      z.object({
        type: z.string(),
        description: z.string(),
        params: z.record(z.string(), parameterEntry),
      }),
    ),
  })
  .meta({
    id: 'OperationCatalogue',
    description: "A pipeline's operations, their parameters, ranges and defaults",
  });
export type PublicOperationCatalogue = z.infer<typeof publicOperationCatalogue>;

/**
 * The body of a webhook delivery, exactly the spec's Events payload: only the spec's three
 * metrics, `outputKey` a storage key (not a link), `result: null` on `job.failed`.
 */
export const publicWebhookEvent = z
  .object({
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
  })
  .meta({
    id: 'WebhookEvent',
    description: 'The body of a webhook delivery; result is null on job.failed',
  });
export type PublicWebhookEvent = z.infer<typeof publicWebhookEvent>;

/**
 * The headers of every webhook delivery besides Content-Type, and what each carries (spec,
 * Events; docs/decisions.md#webhooks): the spec's `X-Service-*` and the Standard Webhooks
 * `webhook-*`, signed with the same secret. The OpenAPI document's `webhooks` states them.
 */
export const WEBHOOK_DELIVERY_HEADERS = {
  'X-Service-Event': '`job.completed` or `job.failed`, as in the body',
  'X-Service-Timestamp': 'Unix time in seconds when the delivery was signed',
  'X-Service-Signature':
    '`sha256=` and the hex HMAC-SHA256 of `<X-Service-Timestamp>.<raw body>`, keyed with the ' +
    "account's signing secret (the whole `whsec_…` string, as UTF-8 bytes). Compare in constant " +
    'time and refuse timestamps 300 seconds or more from now',
  'X-Service-Delivery': 'Unique per delivery attempt',
  'webhook-id':
    'Standard Webhooks message id: the same across the retries of one job event (a deduplication key)',
  'webhook-timestamp': 'Standard Webhooks: the same value as X-Service-Timestamp',
  'webhook-signature':
    'Standard Webhooks: `v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<raw body>">`, ' +
    'keyed with the base64-decoded part of the secret after `whsec_`; while a rotated-out secret ' +
    'is in its grace period, one signature per secret, space-separated, the new one first',
} as const;
