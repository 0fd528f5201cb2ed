import {
  type CreateJobRequest,
  type CreationRoute,
  creationRoute,
  imageOutputFormats,
} from '@tamp/proto';

/** proto's creationRoute (shared with the client, which retries only deduplicated creations). */
export function routeOf(request: CreateJobRequest): CreationRoute {
  const encode = request.operations.findLast((operation) => operation.type === 'encode');
  return creationRoute({
    pipeline: request.pipeline,
    webhookUrl: request.webhookUrl,
    inlineTextBytes:
      request.source.kind === 'text' ? Buffer.byteLength(request.source.text, 'utf8') : undefined,
    imageFormats:
      encode?.type === 'encode' && 'format' in encode.params
        ? imageOutputFormats(encode.params)
        : undefined,
  });
}
