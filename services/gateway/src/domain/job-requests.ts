import {
  type AudioJobBody,
  type audioOperationSchema,
  audioPipeline,
  expandPreset,
  type ImageJobBody,
  type imageOperationSchema,
  imagePipeline,
  type Pipeline,
  type TextJobBody,
  type textOperationSchema,
  textPipeline,
} from '@tamp/proto';
import type { z } from 'zod';

/**
 * Request bodies of POST /v1/audio|image|text live in proto (`proto/src/requests.ts`), where the
 * client checks its requests with the same schemas.
 */
export {
  type AudioJobBody,
  audioJobBody,
  type ImageJobBody,
  idempotencyHeaders,
  imageJobBody,
  JOB_BODIES,
  type TextJobBody,
  textJobBody,
} from '@tamp/proto';

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
