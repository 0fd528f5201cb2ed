import { consumeStream, type Logger, type NatsConnection } from '@tamp/kit';
import { jobEvent, type Topology } from '@tamp/proto';
import type { UsageRecording } from '../application/usage-recording';

/** Redelivery delay of events whose recording failed (MongoDB unavailable). */
const RETRY_DELAY_MS = 2_000;
/** The most events recorded with one write. */
const MAX_BATCH = 100;

/**
 * EVENTS through the durable `billing` consumer, in batches of what arrived meanwhile (one write
 * each), acknowledged once recorded (the kit's consumeStream rule).
 */
export function consumeJobEvents(options: {
  nats: NatsConnection;
  topology: Topology;
  logger: Logger;
  usage: UsageRecording;
}): Promise<{ stop(): Promise<void> }> {
  const { usage } = options;
  return consumeStream({
    nats: options.nats,
    consumer: options.topology.consumers.billing,
    schema: jobEvent,
    maxMessages: MAX_BATCH,
    maxBatch: MAX_BATCH,
    retryDelayMs: RETRY_DELAY_MS,
    logger: options.logger,
    async handleBatch(events) {
      await usage.record(events);
      return events.map(() => 'ack' as const);
    },
  });
}
