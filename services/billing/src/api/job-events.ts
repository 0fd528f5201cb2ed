import { consumeStream, type Logger, type NatsConnection } from '@tamp/kit';
import { jobEvent, type Topology } from '@tamp/proto';
import type { UsageRecording } from '../application/usage-recording';

/** Redelivery delay of events whose recording failed (MongoDB unavailable). */
const RETRY_DELAY_MS = 2_000;
/** The most events recorded with one write. */
const MAX_BATCH = 100;
/**
 * How long a batch waits for more events: nobody waits on a usage record, and a busy stream
 * then writes one insert per window rather than one per job (an insert of many documents costs
 * FerretDB a fraction of one each, docs/performance.md). Far below ack_wait (30 s); usage is
 * readable this much later.
 */
const LINGER_MS = 200;

/**
 * EVENTS through the durable `billing` consumer, in batches of what arrived within LINGER_MS
 * (one write each), acknowledged once recorded (the kit's consumeStream rule).
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
    lingerMs: LINGER_MS,
    retryDelayMs: RETRY_DELAY_MS,
    logger: options.logger,
    async handleBatch(events) {
      await usage.record(events);
      return events.map(() => 'ack' as const);
    },
  });
}
