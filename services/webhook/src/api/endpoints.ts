import { EndpointGroup, type Rpc } from '@tamp/kit';
import { webhookEndpoints } from '@tamp/proto';
import type { DeliveryLog } from '../application/delivery-log';
import type { TestDelivery } from '../application/test-delivery';

/** `webhookEndpoints` on NATS request/reply: each handler is one call into application/. */
export function serveWebhookEndpoints(
  rpc: Rpc,
  application: { log: DeliveryLog; testDelivery: TestDelivery },
): Promise<EndpointGroup> {
  const { log, testDelivery } = application;
  return new EndpointGroup(rpc)
    .serve(webhookEndpoints.listDeliveries, ({ jobId }) => log.list(jobId))
    .serve(webhookEndpoints.redeliver, ({ jobId, event }) => log.redeliver(jobId, event))
    .serve(webhookEndpoints.sendTestDelivery, ({ accountId, jobId }, { deadline }) =>
      testDelivery.send(accountId, jobId, deadline),
    )
    .ready();
}
