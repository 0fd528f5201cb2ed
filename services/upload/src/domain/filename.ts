import {
  CONTENT_TYPES_BY_EXTENSION,
  extensionOf,
  LIMITS,
  ServiceError,
  type UploadExtension,
} from '@tamp/proto';

export interface ParsedFilename {
  extension: UploadExtension;
  contentType: string;
}

export function isUploadExtension(value: string): value is UploadExtension {
  return Object.hasOwn(CONTENT_TYPES_BY_EXTENSION, value);
}

/**
 * The extension decides the content type the presigned PUT is bound to. The gateway validates
 * the body shape already; the length is checked again because this service stores the name and
 * other callers (admin tools, tests) reach it over NATS too. Length counts Unicode characters
 * (code points), which never exceeds the UTF-16 length a JSON schema counts, so anything the
 * gateway accepts is accepted here.
 */
export function parseFilename(filename: string): ParsedFilename {
  const characters = [...filename].length;
  const { min, max } = LIMITS.filenameLength;
  if (characters < min || characters > max) {
    throw new ServiceError('VALIDATION_ERROR', 'The request is invalid', [
      { path: 'filename', message: `must be ${min}–${max} characters` },
    ]);
  }
  const extension = extensionOf(filename);
  if (extension === undefined || !isUploadExtension(extension)) {
    throw new ServiceError(
      'INVALID_FORMAT',
      `The file extension must be one of ${Object.keys(CONTENT_TYPES_BY_EXTENSION).join(', ')}`,
      { filename },
    );
  }
  return { extension, contentType: CONTENT_TYPES_BY_EXTENSION[extension] };
}
