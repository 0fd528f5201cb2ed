import type { ConsumedUpload, CreateJobRequest, JobInput } from '@tamp/proto';
import type { JobDocument } from './job';

/** The job a creation stores, as of `now`: `created`, nothing published, charged or settled yet. */
export function newJob(
  request: CreateJobRequest,
  upload: ConsumedUpload | undefined,
  now: Date,
): JobDocument {
  return {
    _id: request.jobId,
    accountId: request.accountId,
    pipeline: request.pipeline,
    status: 'created',
    operations: request.operations,
    preset: request.preset ?? null,
    input: inputOf(request, upload),
    filename: request.pipeline === 'text' ? null : (upload?.filename ?? null),
    webhookUrl: request.webhookUrl,
    inline: false,
    attempts: 0,
    lastError: null,
    createdAt: now,
    updatedAt: now,
    completedAt: null,
    retryAt: null,
    result: null,
    error: null,
    usage: null,
    refundPending: false,
  };
}

function inputOf(request: CreateJobRequest, upload: ConsumedUpload | undefined): JobInput {
  const source = request.source;
  switch (source.kind) {
    case 'upload':
      if (upload === undefined) throw new Error('upload source without a consumed upload');
      return {
        kind: 'upload',
        uploadId: upload.uploadId,
        key: upload.key,
        size: upload.size,
        contentType: upload.contentType,
        filename: upload.filename,
      };
    case 'text':
      return { kind: 'text', text: source.text };
    case 'stored-text':
      return { kind: 'stored-text', key: source.key, size: source.size };
  }
}
