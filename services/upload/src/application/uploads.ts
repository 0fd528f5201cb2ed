import type { EndpointRequest, EndpointResponse } from '@tamp/kit';
import { isId, LIMITS, newId, ServiceError, storageKeys, type uploadEndpoints } from '@tamp/proto';
import type { UploadRepository } from '../adapters/upload-repository';
import type { UploadStorage } from '../adapters/upload-storage';
import {
  checkAvailability,
  headBytesNeeded,
  inspectStoredObject,
  judgeConsumption,
  notCompleted,
} from '../domain/consumption';
import { parseFilename } from '../domain/filename';
import type { Upload } from '../domain/upload';

type CreateUploadRequest = EndpointRequest<typeof uploadEndpoints.createUpload>;
type CreateUploadResponse = EndpointResponse<typeof uploadEndpoints.createUpload>;
type ConsumeUploadRequest = EndpointRequest<typeof uploadEndpoints.consumeUpload>;
type ConsumeUploadResponse = EndpointResponse<typeof uploadEndpoints.consumeUpload>;

export type Clock = () => Date;

/** The two operations of the service: hand out an upload URL, and let a job consume an upload. */
export class Uploads {
  constructor(
    private readonly repository: UploadRepository,
    private readonly storage: UploadStorage,
    private readonly clock: Clock,
  ) {}

  /** POST /v1/upload: INVALID_FORMAT for an extension not allowed, FILE_TOO_LARGE over the plan. */
  async create(request: CreateUploadRequest): Promise<CreateUploadResponse> {
    // The account id becomes part of a storage key; only a well-formed id may get there.
    if (!isId('account', request.accountId)) {
      throw new ServiceError('VALIDATION_ERROR', 'The request is invalid', [
        { path: 'accountId', message: 'must be an account id' },
      ]);
    }
    const { extension, contentType } = parseFilename(request.filename);
    if (request.size > request.maxUploadBytes) {
      throw new ServiceError(
        'FILE_TOO_LARGE',
        `The file is ${request.size} bytes; the plan allows at most ${request.maxUploadBytes}`,
        { size: request.size, maxUploadBytes: request.maxUploadBytes },
      );
    }
    const createdAt = this.clock();
    const id = newId('upload', createdAt.getTime());
    const key = storageKeys.upload(request.accountId, id);
    const upload: Upload = {
      _id: id,
      accountId: request.accountId,
      filename: request.filename,
      extension,
      contentType,
      declaredSize: request.size,
      key,
      createdAt,
      expiresAt: new Date(createdAt.getTime() + LIMITS.uploadLifetimeMs),
      consumption: null,
    };
    const uploadUrl = await this.storage.presignPut(key, {
      type: contentType,
      length: request.size,
    });
    await this.repository.insert(upload);
    return {
      id,
      uploadUrl,
      contentType,
      uploadUrlExpiresIn: LIMITS.uploadUrlTtlSeconds,
      expiresAt: upload.expiresAt.toISOString(),
    };
  }

  /** A job takes the upload as its input; the order of the checks is in domain/consumption.ts. */
  async consume(request: ConsumeUploadRequest): Promise<ConsumeUploadResponse> {
    const now = this.clock();
    // A malformed id is unknown, never a validation error (docs/decisions.md#ids).
    const found = isId('upload', request.uploadId)
      ? await this.repository.find(request.uploadId)
      : null;
    const upload = checkAvailability(found, request, now);
    let consumption = upload.consumption;
    if (consumption === null) {
      const object = await this.storage.takeCheckedCopy(
        upload.key,
        checkedKeyOf(upload),
        headBytesNeeded(upload),
      );
      if (object === undefined) throw notCompleted();
      consumption = await this.repository.recordFirstConsumption(
        upload._id,
        inspectStoredObject(upload, object, now),
      );
    }
    judgeConsumption(consumption, request.maxUploadBytes);
    return {
      uploadId: upload._id,
      key: checkedKeyOf(upload),
      size: consumption.size,
      contentType: upload.contentType,
      filename: upload.filename,
    };
  }
}

/** Where the checked copy of an upload lives (see UploadStorage.takeCheckedCopy). */
export function checkedKeyOf(upload: { accountId: string; _id: string }): string {
  return storageKeys.checkedUpload(upload.accountId, upload._id);
}
