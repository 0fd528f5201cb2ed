import { z } from 'zod';
import { publicUpload } from '../api';
import { PIPELINES } from '../limits';
import { endpoint } from './endpoint';

/** An upload a job may consume: the first-consumption checks have passed. */
export const consumedUpload = z.object({
  uploadId: z.string(),
  key: z.string(),
  size: z.number().int().nonnegative(),
  contentType: z.string(),
  filename: z.string(),
});
export type ConsumedUpload = z.infer<typeof consumedUpload>;

export const uploadEndpoints = {
  /** INVALID_FORMAT for an extension not allowed, FILE_TOO_LARGE over `maxUploadBytes`. */
  createUpload: endpoint(
    'upload',
    'create-upload',
    z.object({
      accountId: z.string(),
      filename: z.string(),
      size: z.number().int().positive(),
      maxUploadBytes: z.number().int().positive(),
    }),
    publicUpload,
  ),
  /**
   * Checks, in this order: unknown, malformed or another account's id (404 UPLOAD_NOT_FOUND);
   * an extension the pipeline does not take (422 INVALID_FORMAT); older than 24 h (410
   * UPLOAD_EXPIRED); then the spec's first-consumption checks: the object exists (409
   * UPLOAD_NOT_COMPLETED), real size within the plan (413), leading bytes match the kind (422).
   * The facts of the first consumption are stored; later jobs reuse them (until 24 h).
   */
  consumeUpload: endpoint(
    'upload',
    'consume-upload',
    z.object({
      accountId: z.string(),
      uploadId: z.string(),
      pipeline: z.enum(PIPELINES),
      maxUploadBytes: z.number().int().positive(),
    }),
    consumedUpload,
  ),
};
