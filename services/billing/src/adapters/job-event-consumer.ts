import { type JsMsg, jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { inConsumerSpan } from '@tamp/kit';
import { type JobEvent, jobEvent, ServiceError, type Topology } from '@tamp/proto';
import type { Logger } from 'pino';

const RETRY_DELAY_MS = 2_000;

/**
 * Reads EVENTS through the durable `billing` consumer, one message at a time, acking each only
 * after its handler finished. The handler must be idempotent: JetStream redelivers whatever was
 * not acked (a crash, a timeout), and the same event may also be published twice.
 */
export async function consumeJobEvents(options: {
  nats: NatsConnection;
  topology: Topology;
  logger: Logger;
  handle(event: JobEvent): Promise<void>;
}): Promise<{ stop(): Promise<void> }> {
  const { topology, logger } = options;
  const definition = topology.consumers.billing;
  const consumer = await jetstream(options.nats).consumers.get(
    definition.stream,
    definition.durableName,
  );
  const messages = await consumer.consume({ max_messages: 100 });
  const processing = (async () => {
    for await (const message of messages) {
      await inConsumerSpan(definition.durableName, message, () => process(message));
    }
  })();

  async function process(message: JsMsg): Promise<void> {
    let event: JobEvent;
    try {
      event = jobEvent.parse(message.json());
    } catch (error) {
      // A malformed event will never parse: drop it instead of redelivering it forever.
      logger.error({ err: error, subject: message.subject }, 'invalid job event dropped');
      message.term();
      return;
    }
    try {
      await options.handle(event);
      message.ack();
    } catch (error) {
      if (error instanceof ServiceError && error.code === 'NOT_FOUND') {
        logger.warn({ err: error, jobId: event.jobId }, 'job event for an unknown account');
        message.ack();
        return;
      }
      logger.error({ err: error, jobId: event.jobId }, 'job event failed; redelivering');
      message.nak(RETRY_DELAY_MS);
    }
  }

  return {
    async stop() {
      await messages.close();
      await processing;
    },
  };
}
