import { type JsMsg, jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import type { ConsumerDefinition } from '@tamp/proto';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { readMessage } from './rpc';

/** What a stream handler decided for one message. */
export type StreamVerdict =
  /** Done with it (handled, a duplicate, or nothing to do): acknowledged. */
  | 'ack'
  /** Not now (a peer is unavailable): redelivered by JetStream after `retryDelayMs`. */
  | 'retry';

export interface StreamConsumerOptions<Schema extends z.ZodType> {
  nats: NatsConnection;
  /** The durable consumer (provisioned with the topology) to read from. */
  consumer: ConsumerDefinition;
  /** Every message's body; one that does not match is terminated, never redelivered. */
  schema: Schema;
  /** Must be idempotent: JetStream redelivers what was not acknowledged, and publishers repeat. */
  handle(message: z.output<Schema>): Promise<StreamVerdict>;
  /** Delay of a redelivery asked for by `retry` or by a handler that threw. */
  retryDelayMs: number;
  /** Messages JetStream may hand to this process ahead of the one being handled. */
  maxMessages: number;
  logger: Logger;
}

/**
 * Reads a JetStream durable consumer one message at a time, with one rule for every service:
 * a body that does not parse is terminated (redelivering it can never help); `ack` is
 * acknowledged, confirmed by the server; `retry`, or a handler that throws, is naked with
 * `retryDelayMs`, so JetStream itself redelivers it later.
 */
export async function consumeStream<Schema extends z.ZodType>(
  options: StreamConsumerOptions<Schema>,
): Promise<{ stop(): Promise<void> }> {
  const { consumer: definition, logger } = options;
  const consumer = await jetstream(options.nats).consumers.get(
    definition.stream,
    definition.durableName,
  );
  const messages = await consumer.consume({ max_messages: options.maxMessages });

  async function process(message: JsMsg): Promise<void> {
    const parsed = readMessage(message, options.schema);
    if (!parsed.ok) {
      logger.error(
        { subject: message.subject, seq: message.seq, issues: parsed.issues },
        'invalid message dropped',
      );
      // No reason text: nats-server 2.9 (the one provisioned) ignores `+TERM <reason>`, and the
      // message would come back after every ack_wait.
      message.term();
      return;
    }
    let verdict: StreamVerdict;
    try {
      verdict = await options.handle(parsed.value);
    } catch (error) {
      logger.error({ err: error, subject: message.subject, seq: message.seq }, 'message failed');
      verdict = 'retry';
    }
    if (verdict === 'ack') await message.ackAck().catch(() => message.ack());
    else message.nak(options.retryDelayMs);
  }

  const consuming = (async () => {
    for await (const message of messages) await process(message);
  })().catch((error: unknown) => logger.error({ err: error }, 'stream consumer stopped'));

  return {
    async stop() {
      await messages.close().catch(() => undefined);
      await consuming;
    },
  };
}
