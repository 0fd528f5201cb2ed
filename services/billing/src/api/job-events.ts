import { consumeStream, type Logger, type NatsConnection } from '@tamp/kit';
import { jobEvent, ServiceError, type Topology } from '@tamp/proto';
import type { UsageRecording } from '../application/usage-recording';

/** Redelivery delay of an event whose recording failed (MongoDB unavailable). */
const RETRY_DELAY_MS = 2_000;

/**
 * EVENTS through the durable `billing` consumer, one message at a time, acknowledged once
 * recorded (the kit's consumeStream rule); an event of an account that no longer exists is
 * acknowledged with a warning, as nothing could ever record it.
 */
export function consumeJobEvents(options: {
  nats: NatsConnection;
  topology: Topology;
  logger: Logger;
  usage: UsageRecording;
}): Promise<{ stop(): Promise<void> }> {
  const { logger, usage } = options;
  return consumeStream({
    nats: options.nats,
    consumer: options.topology.consumers.billing,
    schema: jobEvent,
    maxMessages: 100,
    retryDelayMs: RETRY_DELAY_MS,
    logger,
    async handle(event) {
      try {
        await usage.record(event);
      } catch (error) {
        if (!(error instanceof ServiceError && error.code === 'NOT_FOUND')) throw error;
        logger.warn({ err: error, jobId: event.jobId }, 'job event for an unknown account');
      }
      return 'ack';
    },
  });
}
