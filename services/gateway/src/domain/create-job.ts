import type { AccountLimits, CreateJobInput, Pipeline } from '@tamp/proto';
import type { InlineTextPlan } from './inline-text';
import {
  type AudioJobBody,
  type ImageJobBody,
  resolveChain,
  type TextJobBody,
} from './job-requests';
import { requestHash } from './request-hash';

export interface CreateJobContext {
  jobId: string;
  account: Pick<AccountLimits, 'accountId' | 'maxUploadBytes'>;
  idempotencyKey: string | undefined;
}

const ENDPOINTS: Record<Pipeline, string> = {
  audio: 'POST /v1/audio',
  image: 'POST /v1/image',
  text: 'POST /v1/text',
};

function common(
  pipeline: Pipeline,
  body: { webhookUrl?: string | undefined },
  context: CreateJobContext,
) {
  return {
    jobId: context.jobId,
    accountId: context.account.accountId,
    webhookUrl: body.webhookUrl ?? null,
    idempotencyKey: context.idempotencyKey ?? null,
    requestHash: requestHash(ENDPOINTS[pipeline], body),
    maxUploadBytes: context.account.maxUploadBytes,
  };
}

/**
 * POST /v1/audio|image → createJob: the uploaded file and the resolved chain (preset expanded,
 * encode last).
 */
export function uploadCreateJob<P extends 'audio' | 'image'>(
  pipeline: P,
  uploadId: string,
  body: P extends 'audio' ? AudioJobBody : ImageJobBody,
  context: CreateJobContext,
): CreateJobInput {
  return {
    ...common(pipeline, body, context),
    pipeline,
    source: { kind: 'upload', uploadId },
    operations: resolveChain(pipeline as 'audio', body as AudioJobBody),
    preset: body.preset,
  } as CreateJobInput;
}

/**
 * POST /v1/text → createJob. `inline` is how the gateway handled `text` (see planInlineText):
 * in the message, or stored at `storedKey` first.
 */
export function textCreateJob(
  body: TextJobBody,
  context: CreateJobContext,
  inline: { plan: InlineTextPlan; storedKey: string } | undefined,
): CreateJobInput {
  let source: CreateJobInput['source'];
  if (body.fileId !== undefined) {
    source = { kind: 'upload', uploadId: body.fileId };
  } else if (inline === undefined || inline.plan.kind === 'text') {
    source = { kind: 'text', text: body.text ?? '' };
  } else {
    source = {
      kind: 'stored-text',
      key: inline.storedKey,
      size: inline.plan.size,
      characters: inline.plan.characters,
    };
  }
  return {
    ...common('text', body, context),
    pipeline: 'text',
    source,
    operations: resolveChain('text', body),
    preset: body.preset,
  };
}
