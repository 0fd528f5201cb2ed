import {
  EXTENSIONS_BY_PIPELINE,
  type Pipeline,
  ServiceError,
  type UploadExtension,
} from '@tamp/proto';
import { ACCEPTED_FORMATS, detectFormat, SIGNATURE_HEAD_BYTES } from './signature';
import type { FirstConsumption, Upload } from './upload';

/*
 * The order of the checks when a job consumes an upload, cheapest and most certain answer first:
 *
 *   1. UPLOAD_NOT_FOUND (404): malformed id, unknown id, or another account's upload. The spec
 *      lists "known to the account" last, but nothing else can be said about an upload that does
 *      not exist for the caller, and answering 410 or 409 for someone else's id would leak it.
 *   2. INVALID_FORMAT (422): the pipeline does not take this kind of file (a `.png` given to
 *      /v1/audio). Known from the extension alone, true forever, and no re-upload or retry can
 *      fix it, so the caller learns it before anything that depends on time or storage.
 *   3. UPLOAD_EXPIRED (410): more than 24 hours since creation, even when an earlier job consumed
 *      it successfully (docs/decisions.md#uploads).
 *   4. The spec's first-consumption checks, in the spec's order:
 *      a. UPLOAD_NOT_COMPLETED (409): no object in storage. Not stored: the client may still PUT.
 *      b. FILE_TOO_LARGE (413): the real size exceeds the plan limit.
 *      c. INVALID_FORMAT (422): the leading bytes do not match the kind (text skips this), or
 *         storage holds the object under another content type than the one the URL was bound to.
 *      The storage facts behind 4b and 4c are measured once, at the first consumption that finds
 *      the object, stored, and judged again for every later job (see FirstConsumption).
 */

export interface ConsumptionRequest {
  accountId: string;
  pipeline: Pipeline;
}

/** Checks 1–3. Returns the upload when a job may go on to the storage checks. */
export function checkAvailability(
  upload: Upload | null,
  request: ConsumptionRequest,
  now: Date,
): Upload {
  if (upload === null || upload.accountId !== request.accountId) {
    throw new ServiceError('UPLOAD_NOT_FOUND', 'No upload with this id exists');
  }
  const accepted: readonly UploadExtension[] = EXTENSIONS_BY_PIPELINE[request.pipeline];
  if (!accepted.includes(upload.extension)) {
    throw new ServiceError(
      'INVALID_FORMAT',
      `A ${request.pipeline} job takes ${accepted.join(', ')} uploads, not ${upload.extension}`,
      { extension: upload.extension, accepted },
    );
  }
  if (now.getTime() > upload.expiresAt.getTime()) {
    throw new ServiceError(
      'UPLOAD_EXPIRED',
      `The upload expired at ${upload.expiresAt.toISOString()}; upload the file again`,
    );
  }
  return upload;
}

/** How many leading bytes the signature check of this upload needs (0: none, plain text). */
export function headBytesNeeded(upload: Upload): number {
  return ACCEPTED_FORMATS[upload.extension] === null ? 0 : SIGNATURE_HEAD_BYTES;
}

/** What storage reported about the object. */
export interface StoredObjectFacts {
  size: number;
  contentType: string | undefined;
  /** The first bytes (as many as headBytesNeeded asked for, fewer for a shorter object). */
  head: Uint8Array;
}

export function notCompleted(): ServiceError {
  return new ServiceError(
    'UPLOAD_NOT_COMPLETED',
    'The file was never uploaded: send it with PUT to the uploadUrl first',
  );
}

/** Turns what storage holds into the facts stored with the upload (check 4a has passed). */
export function inspectStoredObject(
  upload: Upload,
  object: StoredObjectFacts,
  now: Date,
): FirstConsumption {
  const accepted = ACCEPTED_FORMATS[upload.extension];
  const detected = accepted === null ? undefined : detectFormat(object.head);
  let formatProblem: string | null = null;
  if (object.contentType !== undefined && mediaType(object.contentType) !== upload.contentType) {
    // The presigned PUT is bound to the content type, so this means the bytes arrived some other
    // way; they are not what the client declared.
    formatProblem = `The file was stored as ${object.contentType}, not ${upload.contentType}`;
  } else if (accepted !== null && (detected === undefined || !accepted.includes(detected))) {
    formatProblem = `The file content is not a valid ${kindName(upload.extension)} file`;
  }
  return { checkedAt: now, size: object.size, detectedFormat: detected ?? null, formatProblem };
}

/** Checks 4b and 4c, against the limit of the job at hand. */
export function judgeConsumption(consumption: FirstConsumption, maxUploadBytes: number): void {
  if (consumption.size > maxUploadBytes) {
    throw new ServiceError(
      'FILE_TOO_LARGE',
      `The file is ${consumption.size} bytes; the plan allows at most ${maxUploadBytes}`,
      { size: consumption.size, maxUploadBytes },
    );
  }
  if (consumption.formatProblem !== null) {
    throw new ServiceError('INVALID_FORMAT', consumption.formatProblem);
  }
}

function mediaType(contentType: string): string {
  return (contentType.split(';')[0] ?? '').trim().toLowerCase();
}

function kindName(extension: UploadExtension): string {
  switch (extension) {
    case '.mp3':
    case '.wav':
      return 'MP3 or WAV audio';
    case '.pdf':
      return 'PDF';
    default:
      return 'JPEG, PNG or WebP image';
  }
}
