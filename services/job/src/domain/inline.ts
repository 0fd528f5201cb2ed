import { type CreateJobRequest, LIMITS } from './requests';

/**
 * Where a creation request goes, decided from the request alone where possible:
 * - `queued`: audio, anything with a webhookUrl, AVIF output, text from a file or stored text,
 *   inline text over the fast-path size;
 * - `inline`: inline text within the fast path and no webhookUrl;
 * - `by-input-size`: an image whose upload size decides (inline at most 5 MB).
 */
export type Route = 'queued' | 'inline' | 'by-input-size';

export function routeOf(request: CreateJobRequest): Route {
  if (request.webhookUrl !== null) return 'queued';
  switch (request.pipeline) {
    case 'audio':
      return 'queued';
    case 'text':
      return request.source.kind === 'text' &&
        Buffer.byteLength(request.source.text, 'utf8') <= LIMITS.textFastPathBytes
        ? 'inline'
        : 'queued';
    case 'image': {
      const encode = request.operations.findLast((operation) => operation.type === 'encode');
      if (encode?.type === 'encode' && encode.params.format === 'avif') return 'queued';
      return 'by-input-size';
    }
  }
}

export function imageInputFitsInline(inputBytes: number): boolean {
  return inputBytes <= LIMITS.imageInlineBytes;
}
