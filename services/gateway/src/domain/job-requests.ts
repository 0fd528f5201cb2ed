import {
  AUDIO_PRESET_NAMES,
  audioOperationSchema,
  audioPipeline,
  expandPreset,
  httpUrl,
  IMAGE_PRESET_NAMES,
  imageOperationSchema,
  imagePipeline,
  LIMITS,
  type Pipeline,
  TEXT_PRESET_NAMES,
  textOperationSchema,
  textPipeline,
} from '@tamp/proto';
import { z } from 'zod';
import { countCharacters } from './inline-text';

/**
 * Request bodies of POST /v1/audio|image|text, built from proto's operation schemas so that
 * validation, defaults and the OpenAPI document come from one source.
 */
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

export const audioJobBody = exactlyOneOfEach(
  z.strictObject({
    audioId: z.string().min(1).describe('Upload id of an .mp3 or .wav file'),
    preset: z.enum(AUDIO_PRESET_NAMES).optional(),
    operations: operationsOf(audioOperationSchema).optional(),
    webhookUrl: webhookUrl.optional(),
  }),
  [PRESET_OR_OPERATIONS],
);

export const imageJobBody = exactlyOneOfEach(
  z.strictObject({
    imageId: z.string().min(1).describe('Upload id of a .jpg, .jpeg, .png or .webp file'),
    preset: z.enum(IMAGE_PRESET_NAMES).optional(),
    operations: operationsOf(imageOperationSchema).optional(),
    webhookUrl: webhookUrl.optional(),
  }),
  [PRESET_OR_OPERATIONS],
);

export const textJobBody = exactlyOneOfEach(
  z.strictObject({
    text: z
      .string()
      .refine((text) => countCharacters(text) <= LIMITS.inlineTextCharacters, {
        message: `text is limited to ${LIMITS.inlineTextCharacters} characters`,
      })
      .describe('Inline text, up to 5,000,000 characters')
      .optional(),
    fileId: z.string().min(1).describe('Upload id of a .pdf or .txt file').optional(),
    preset: z.enum(TEXT_PRESET_NAMES).optional(),
    operations: operationsOf(textOperationSchema).optional(),
    webhookUrl: webhookUrl.optional(),
  }),
  [PRESET_OR_OPERATIONS, ['text', 'fileId']],
);

export type AudioJobBody = z.output<typeof audioJobBody>;
export type ImageJobBody = z.output<typeof imageJobBody>;
export type TextJobBody = z.output<typeof textJobBody>;

export const JOB_BODIES = { audio: audioJobBody, image: imageJobBody, text: textJobBody } as const;

export const idempotencyHeaders = z.looseObject({
  'idempotency-key': z
    .string()
    .min(LIMITS.idempotencyKeyLength.min)
    .max(LIMITS.idempotencyKeyLength.max)
    .describe('Optional, 1–255 characters, scoped to the account; replays return the same job')
    .optional(),
});

/** The resolved chain: a preset expanded, or the given operations with the pipeline's rules. */
export function resolveChain(
  pipeline: 'audio',
  body: Pick<AudioJobBody, 'preset' | 'operations'>,
): z.output<typeof audioOperationSchema>[];
export function resolveChain(
  pipeline: 'image',
  body: Pick<ImageJobBody, 'preset' | 'operations'>,
): z.output<typeof imageOperationSchema>[];
export function resolveChain(
  pipeline: 'text',
  body: Pick<TextJobBody, 'preset' | 'operations'>,
): z.output<typeof textOperationSchema>[];
export function resolveChain(
  pipeline: Pipeline,
  body: { preset?: string | undefined; operations?: readonly { type: string }[] | undefined },
): unknown[] {
  const definition = { audio: audioPipeline, image: imagePipeline, text: textPipeline }[pipeline];
  if (body.preset !== undefined) return expandPreset(definition as never, body.preset);
  return definition.finalizeChain((body.operations ?? []) as never);
}
