import type { Pipeline } from './limits';

/** Content type by extension, exactly the spec's table. */
export const CONTENT_TYPES_BY_EXTENSION = {
  '.mp3': 'audio/mpeg',
  '.wav': 'audio/wav',
  '.pdf': 'application/pdf',
  '.txt': 'text/plain',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.png': 'image/png',
  '.webp': 'image/webp',
} as const;

export type UploadExtension = keyof typeof CONTENT_TYPES_BY_EXTENSION;

/** Which upload extensions each job endpoint accepts; anything else is INVALID_FORMAT. */
export const EXTENSIONS_BY_PIPELINE: Record<Pipeline, readonly UploadExtension[]> = {
  audio: ['.mp3', '.wav'],
  image: ['.jpg', '.jpeg', '.png', '.webp'],
  text: ['.pdf', '.txt'],
};

/** Lower-cased extension of a filename, or undefined when it has none. */
export function extensionOf(filename: string): string | undefined {
  const dot = filename.lastIndexOf('.');
  return dot <= 0 || dot === filename.length - 1 ? undefined : filename.slice(dot).toLowerCase();
}

export function contentTypeFor(filename: string): string | undefined {
  const extension = extensionOf(filename);
  return extension !== undefined && Object.hasOwn(CONTENT_TYPES_BY_EXTENSION, extension)
    ? CONTENT_TYPES_BY_EXTENSION[extension as UploadExtension]
    : undefined;
}

/**
 * The allowed extensions as a JSON Schema `pattern` (case-insensitive by construction), for the
 * OpenAPI document. Only documented there: a filename that does not match is refused by the
 * upload service with 422 INVALID_FORMAT, as the spec says, not by schema validation.
 */
export const UPLOAD_FILENAME_PATTERN = `\\.(${Object.keys(CONTENT_TYPES_BY_EXTENSION)
  .map((extension) =>
    [...extension.slice(1)]
      .map((char) =>
        char.toLowerCase() === char.toUpperCase()
          ? char
          : `[${char.toLowerCase()}${char.toUpperCase()}]`,
      )
      .join(''),
  )
  .join('|')})$`;
