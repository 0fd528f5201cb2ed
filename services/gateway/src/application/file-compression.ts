import type { ObjectStore, Rpc } from '@tamp/kit';
import {
  type AccountLimits,
  JOB_BODIES,
  type Pipeline,
  type PublicJob,
  ServiceError,
  storageKeys,
  UPLOAD_FIELD_BY_PIPELINE,
  uploadEndpoints,
} from '@tamp/proto';
import type { JobSubmission, JobSubmissions } from './job-submission';

export interface FileCompression {
  account: AccountLimits;
  filename: string;
  bytes: Buffer;
  pipeline: Pipeline;
  preset: string;
}

/**
 * The dashboard's "try it": one file compressed with one preset, through the same steps an API
 * client takes (an upload record, the object under the upload's key, a job that consumes it),
 * so every check of the upload and the job applies. The bytes arrived with the form, so the
 * gateway stores them itself instead of PUTting to a presigned URL the browser would need.
 */
export class FileCompressions {
  constructor(
    private readonly rpc: Rpc,
    private readonly objectStore: ObjectStore,
    private readonly submissions: JobSubmissions,
  ) {}

  async compress(request: FileCompression): Promise<{ httpStatus: 200 | 202; job: PublicJob }> {
    const { account } = request;
    const upload = await this.rpc.call(uploadEndpoints.createUpload, {
      accountId: account.accountId,
      filename: request.filename,
      size: Math.max(1, request.bytes.length),
      maxUploadBytes: account.maxUploadBytes,
    });
    await this.objectStore
      .putBuffer(
        storageKeys.upload(account.accountId, upload.id),
        request.bytes,
        upload.contentType,
      )
      .catch(() => {
        throw new ServiceError('UNAVAILABLE', 'Storage is unavailable; retry shortly');
      });
    const body = JOB_BODIES[request.pipeline].parse({
      [UPLOAD_FIELD_BY_PIPELINE[request.pipeline]]: upload.id,
      preset: request.preset,
    });
    return this.submissions.submit({ pipeline: request.pipeline, body } as JobSubmission, {
      account,
      idempotencyKey: undefined,
    });
  }
}
