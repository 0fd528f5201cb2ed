import { EndpointGroup, type Rpc } from '@tamp/kit';
import { uploadEndpoints } from '@tamp/proto';
import type { Uploads } from '../application/uploads';

/** `svc.upload.*` on NATS request/reply: each handler is one call into application/. */
export function serveUploadEndpoints(rpc: Rpc, uploads: Uploads): Promise<EndpointGroup> {
  return new EndpointGroup(rpc)
    .serve(uploadEndpoints.createUpload, (request) => uploads.create(request))
    .serve(uploadEndpoints.consumeUpload, (request) => uploads.consume(request))
    .ready();
}
