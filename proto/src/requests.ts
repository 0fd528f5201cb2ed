import { z } from 'zod';
import { JOB_STATUSES, JOB_TYPES, LIMITS, type Pipeline } from './limits';
import { AUDIO_PRESET_NAMES, audioOperationSchema } from './pipelines/audio';
import { IMAGE_PRESET_NAMES, imageOperationSchema } from './pipelines/image';
import { TEXT_PRESET_NAMES, textOperationSchema } from './pipelines/text';
import { storableString } from './storable-strings';
import { UPLOAD_FILENAME_PATTERN } from './uploads';
import { httpUrl } from './webhook-targets';

/**
 * The public requests (bodies, queries, headers) of the API, built from the pipelines'
 * operation schemas: the gateway validates with them, the OpenAPI document is generated from
 * them and the client checks its requests with them before sending.
 */

/** Unicode code points, the unit of the spec's "characters" (an emoji counts once). */
export function countCharacters(text: string): number {
  let surrogatePairs = 0;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        surrogatePairs++;
        index++;
      }
    }
  }
  return text.length - surrogatePairs;
}

/** Body of POST /v1/upload. */
export const uploadRequestBody = z
  .strictObject({
    filename: storableString()
      .min(LIMITS.filenameLength.min)
      .max(LIMITS.filenameLength.max)
      .describe(
        'Extension decides the content type: .mp3 .wav .pdf .txt .jpg .jpeg .png .webp ' +
          '(any case); another extension, or none, is 422 INVALID_FORMAT. U+0000 is refused (400)',
      )
      .meta({ pattern: UPLOAD_FILENAME_PATTERN }),
    size: z
      .number()
      .int()
      .min(1)
      .describe(
        'Declared size in bytes; checked against the plan limit, and the PUT to uploadUrl must send exactly this many',
      ),
  })
  .meta({ id: 'CreateUpload' });

const webhookUrl = httpUrl.describe(
  'Absolute http(s) URL that receives job.completed / job.failed for this job',
);

const operationsOf = <Operation extends z.ZodType>(operation: Operation) =>
  z
    .array(operation)
    .min(LIMITS.operationsPerJob.min)
    .max(LIMITS.operationsPerJob.max)
    .describe('1 to 10 operations, applied in order; omitted params take their defaults');

/**
 * Exactly one field of each pair: both or neither is a VALIDATION_ERROR naming the fields. The
 * checks run even when other fields failed, so `details` lists every issue at once. The rule is
 * also stated in the OpenAPI document (`allOf` of one `oneOf` per pair), which zod cannot
 * derive from a refinement.
 */
function exactlyOneOfEach<Schema extends z.ZodType>(
  schema: Schema,
  pairs: readonly (readonly [string, string])[],
) {
  const present = (value: unknown, key: string) =>
    typeof value === 'object' &&
    value !== null &&
    (value as Record<string, unknown>)[key] !== undefined;
  const always = { when: () => true };
  let checked: z.ZodType = schema;
  for (const [first, second] of pairs) {
    checked = checked
      .refine((value) => !(present(value, first) && present(value, second)), {
        ...always,
        path: [second],
        message: `Send either ${first} or ${second}, not both`,
      })
      .refine((value) => present(value, first) || present(value, second), {
        ...always,
        path: [first],
        message: `One of ${first} or ${second} is required`,
      });
  }
  return (checked as Schema).meta({
    allOf: pairs.map(([first, second]) => ({
      oneOf: [{ required: [first] }, { required: [second] }],
    })),
  });
}

const PRESET_OR_OPERATIONS = ['preset', 'operations'] as const;

/** The fields every job body has after its input: a preset or operations, and a webhook. */
const chainFields = <Preset extends string, Operation extends z.ZodType>(
  presetNames: readonly [Preset, ...Preset[]],
  operation: Operation,
) => ({
  preset: z.enum(presetNames).optional(),
  operations: operationsOf(operation).optional(),
  webhookUrl: webhookUrl.optional(),
});

/** Body of POST /v1/audio. */
export const audioJobBody = exactlyOneOfEach(
  z.strictObject({
    audioId: z.string().min(1).describe('Upload id of an .mp3 or .wav file'),
    ...chainFields(AUDIO_PRESET_NAMES, audioOperationSchema),
  }),
  [PRESET_OR_OPERATIONS],
).meta({ id: 'CreateAudioJob' });

/** Body of POST /v1/image. */
export const imageJobBody = exactlyOneOfEach(
  z.strictObject({
    imageId: z.string().min(1).describe('Upload id of a .jpg, .jpeg, .png or .webp file'),
    ...chainFields(IMAGE_PRESET_NAMES, imageOperationSchema),
  }),
  [PRESET_OR_OPERATIONS],
).meta({ id: 'CreateImageJob' });

/** Body of POST /v1/text. */
export const textJobBody = exactlyOneOfEach(
  z.strictObject({
    text: storableString()
      .refine((text) => countCharacters(text) <= LIMITS.inlineTextCharacters, {
        message: `text is limited to ${LIMITS.inlineTextCharacters} characters`,
      })
      .describe('Inline text, up to 5,000,000 characters')
      .optional(),
    fileId: z.string().min(1).describe('Upload id of a .pdf or .txt file').optional(),
    ...chainFields(TEXT_PRESET_NAMES, textOperationSchema),
  }),
  [PRESET_OR_OPERATIONS, ['text', 'fileId']],
).meta({ id: 'CreateTextJob' });

export type AudioJobBody = z.output<typeof audioJobBody>;
export type ImageJobBody = z.output<typeof imageJobBody>;
export type TextJobBody = z.output<typeof textJobBody>;

export const JOB_BODIES = { audio: audioJobBody, image: imageJobBody, text: textJobBody } as const;

/** What a caller writes for each pipeline: params may be omitted (defaults apply). */
export interface JobRequestBodies {
  audio: z.input<typeof audioJobBody>;
  image: z.input<typeof imageJobBody>;
  text: z.input<typeof textJobBody>;
}

/** The body field that names the upload, per pipeline (text may send `text` instead). */
export const UPLOAD_FIELD_BY_PIPELINE = {
  audio: 'audioId',
  image: 'imageId',
  text: 'fileId',
} as const satisfies Record<Pipeline, string>;

export const idempotencyKey = storableString()
  .min(LIMITS.idempotencyKeyLength.min)
  .max(LIMITS.idempotencyKeyLength.max);

const KEY_KEPT_HOURS = LIMITS.idempotencyKeyTtlMs / 3_600_000;

/**
 * The spec's rule (Common rules for POST /v1/audio, /v1/image, /v1/text): the key applies to
 * queued jobs only; docs/decisions.md#creation-routes-money-and-idempotency closes the rest.
 */
export const idempotencyHeaders = z.looseObject({
  'idempotency-key': idempotencyKey
    .describe(
      `Optional, ${LIMITS.idempotencyKeyLength.min}–${LIMITS.idempotencyKeyLength.max} characters, ` +
        `scoped to the account and kept ${KEY_KEPT_HOURS} hours. Applies to queued jobs only ` +
        '(HTTP 202): a replay answers the job the key created, with 202, and creates or charges ' +
        'nothing; the same key with another endpoint or body is 422 IDEMPOTENCY_KEY_REUSED; ' +
        'while its first creation is still being settled, 409 IDEMPOTENCY_KEY_IN_USE with ' +
        'Retry-After. Inline jobs (HTTP 200) are not deduplicated: the key of an inline-eligible ' +
        'request (a small image or inline text, without webhookUrl) is ignored, even when the ' +
        'job falls back to the queue.',
    )
    .optional(),
});

const DECIMAL_DIGITS = /^[0-9]+$/;

/**
 * A whole number in a query string: decimal digits only, so `limit=1e2`, `wait=0x10`, `wait=1.5`
 * and an empty `wait=` are refused rather than read the way `Number()` reads them. Values that
 * are already numbers (the client checks its own requests with these schemas) pass through.
 * The OpenAPI document shows the inner integer schema.
 */
const queryInteger = (range: { min: number; max: number }) =>
  z.preprocess((value, context) => {
    if (typeof value !== 'string' || DECIMAL_DIGITS.test(value)) return value;
    context.addIssue({ code: 'custom', message: 'must be a whole number in decimal digits' });
    return z.NEVER;
  }, z.coerce.number().int().min(range.min).max(range.max));

/** Query of GET /v1/jobs/:id. */
export const jobReadQuery = z.strictObject({
  wait: queryInteger(LIMITS.waitSeconds)
    .describe('Seconds to hold the response until the job is completed or failed (0–30)')
    .optional(),
});

/** Query of GET /v1/jobs. */
export const jobListQuery = z.strictObject({
  type: z.enum(JOB_TYPES).optional(),
  status: z.enum(JOB_STATUSES).optional(),
  limit: queryInteger(LIMITS.listLimit).default(LIMITS.listLimit.default),
  cursor: storableString().min(1).max(1024).describe('nextCursor of the previous page').optional(),
});
export type JobListQuery = z.input<typeof jobListQuery>;

/**
 * Where a creation goes (spec, POST /v1/image and /v1/text), decided from the request alone
 * where possible:
 * - `queued`: audio, anything with a webhookUrl, output that may be AVIF (`auto` unless its
 *   `accept` leaves AVIF out), text from a file, inline text over the fast-path size;
 * - `inline`: inline text within the fast path and no webhookUrl;
 * - `by-input-size`: an image whose upload size decides (inline at most 5 MB).
 * Only queued creations are deduplicated by Idempotency-Key; inline ones are not.
 */
export type CreationRoute = 'queued' | 'inline' | 'by-input-size';

/** The pipelines with an inline path (workers serve `work.<pipeline>.inline`); audio is always queued. */
export const INLINE_PIPELINES: ReadonlySet<Pipeline> = new Set(['image', 'text']);

export function creationRoute(request: {
  pipeline: Pipeline;
  webhookUrl: string | null | undefined;
  /** Bytes (UTF-8) of inline text; undefined when the input is an upload. */
  inlineTextBytes?: number | undefined;
  /** The formats the resolved chain's encode may produce, for images (imageOutputFormats). */
  imageFormats?: readonly string[] | undefined;
}): CreationRoute {
  if (request.webhookUrl !== null && request.webhookUrl !== undefined) return 'queued';
  if (!INLINE_PIPELINES.has(request.pipeline)) return 'queued';
  switch (request.pipeline) {
    case 'audio':
      return 'queued';
    case 'text':
      return request.inlineTextBytes !== undefined &&
        request.inlineTextBytes <= LIMITS.textFastPathBytes
        ? 'inline'
        : 'queued';
    case 'image':
      return request.imageFormats?.includes('avif') ? 'queued' : 'by-input-size';
  }
}

export function imageInputFitsInline(inputBytes: number): boolean {
  return inputBytes <= LIMITS.imageInlineBytes;
}
