import { consumeStream, type Logger, type NatsConnection } from '@tamp/kit';
import { jobEvent, type Topology } from '@tamp/proto';
import type { DeliveryIntake } from '../application/delivery-intake';

/**
 * EVENTS through the durable `webhook` consumer: each job event becomes its delivery sequence
 * before it is acknowledged; while billing is unavailable JetStream redelivers it after
 * `retryDelayMs` (the kit's consumeStream rule).
 */
export function consumeJobEvents(options: {
  nats: NatsConnection;
  topology: Topology;
  intake: DeliveryIntake;
  retryDelayMs: number;
  logger: Logger;
}): Promise<{ stop(): Promise<void> }> {
  const { intake } = options;
  return consumeStream({
    nats: options.nats,
    consumer: options.topology.consumers.webhook,
    schema: jobEvent,
    handle: (event) => intake.accept(event),
    retryDelayMs: options.retryDelayMs,
    maxMessages: 64,
    logger: options.logger,
  });
}
