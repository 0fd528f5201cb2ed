import { EndpointGroup, type Rpc } from '@tamp/kit';
import { webhookEndpoints } from '@tamp/proto';
import type { DeliveryLog } from '../application/delivery-log';

/** `webhookEndpoints` on NATS request/reply: each handler is one call into application/. */
export function serveWebhookEndpoints(rpc: Rpc, log: DeliveryLog): Promise<EndpointGroup> {
  return new EndpointGroup(rpc)
    .serve(webhookEndpoints.listDeliveries, ({ jobId }) => log.list(jobId))
    .serve(webhookEndpoints.redeliver, ({ jobId, event }) => log.redeliver(jobId, event))
    .ready();
}
