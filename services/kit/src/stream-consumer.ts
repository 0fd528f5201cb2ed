import { type JsMsg, jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { type ConsumerDefinition, jitteredDelayMs } from '@tamp/proto';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { readMessage } from './rpc';
import { inConsumerSpan } from './tracing';

/** What a stream handler decided for one message. */
export type StreamVerdict =
  /** Done with it (handled, a duplicate, or nothing to do): acknowledged. */
  | 'ack'
  /** Not now (a peer is unavailable): redelivered by JetStream after `retryDelayMs`. */
  | 'retry';

interface CommonOptions<Schema extends z.ZodType> {
  nats: NatsConnection;
  /** The durable consumer (provisioned with the topology) to read from. */
  consumer: ConsumerDefinition;
  /** Every message's body; one that does not match is terminated, never redelivered. */
  schema: Schema;
  /**
   * Delay of a redelivery asked for by `retry` or by a handler that threw: at most this, at
   * least half of it (equal jitter, proto's backoff.ts), so the messages refused together while
   * a peer was down do not all come back at the same moment.
   */
  retryDelayMs: number;
  /** Messages JetStream may hand to this process ahead of the ones being handled. */
  maxMessages: number;
  logger: Logger;
}

/** Handlers must be idempotent: JetStream redelivers what was not acknowledged, and publishers repeat. */
type Handling<Schema extends z.ZodType> =
  | {
      /** One message at a time, each in its own CONSUMER span. */
      handle(message: z.output<Schema>): Promise<StreamVerdict>;
      handleBatch?: undefined;
    }
  | {
      /**
       * The messages that arrived while the previous batch was being handled (at least one, at
       * most `maxBatch`), in one call, so a handler can write them with one bulk operation: one
       * verdict per message, in their order. A quiet stream makes batches of one; a busy one,
       * larger batches, without waiting for them to fill.
       */
      handleBatch(messages: z.output<Schema>[]): Promise<StreamVerdict[]>;
      maxBatch: number;
      /**
       * How long a batch's first message waits for others before the batch is handled (0, the
       * default: not at all). For handlers whose write nobody waits on, so a busy stream makes
       * one write per window instead of one per message; the messages stay unacknowledged
       * until written, so a process that dies meanwhile loses nothing (JetStream redelivers).
       */
      lingerMs?: number;
      handle?: undefined;
    };

export type StreamConsumerOptions<Schema extends z.ZodType> = CommonOptions<Schema> &
  Handling<Schema>;

/**
 * Reads a JetStream durable consumer with one rule for every service: a body that does not parse
 * is terminated (redelivering it can never help); `ack` is acknowledged; `retry`, or a handler
 * that throws, is naked with `retryDelayMs`, so JetStream itself redelivers it later. The ack is
 * a plain one, not one the server confirms: a lost ack only brings its message back after
 * `ack_wait`, which the handlers must bear anyway (they are idempotent), so a confirmation would
 * cost a reply per message and buy nothing. Each message (or batch: parented on its first
 * message) is handled in a CONSUMER span, child of its producer's.
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
  const handleBatch: (bodies: z.output<Schema>[]) => Promise<StreamVerdict[]> =
    options.handleBatch === undefined
      ? async (bodies) => [await options.handle(bodies[0]!)]
      : options.handleBatch.bind(options);
  const maxBatch = options.handleBatch === undefined ? 1 : Math.max(1, options.maxBatch);
  const lingerMs = options.handleBatch === undefined ? 0 : (options.lingerMs ?? 0);

  /** Parses each message (terminating what does not parse), handles the rest, settles each. */
  async function process(batch: JsMsg[]): Promise<void> {
    const parsed: { message: JsMsg; body: z.output<Schema> }[] = [];
    for (const message of batch) {
      const read = readMessage(message, options.schema);
      if (read.ok) {
        parsed.push({ message, body: read.value });
        continue;
      }
      logger.error(
        { subject: message.subject, seq: message.seq, issues: read.issues },
        'invalid message dropped',
      );
      // No reason text: servers before 2.10 ignore `+TERM <reason>`, and the message would come
      // back after every ack_wait. Tamp runs 2.15, but a deployment may point at an older NATS.
      message.term();
    }
    if (parsed.length === 0) return;
    let verdicts: StreamVerdict[];
    try {
      verdicts = await handleBatch(parsed.map((each) => each.body));
      if (verdicts.length !== parsed.length) {
        throw new Error(`${verdicts.length} verdicts for ${parsed.length} messages`);
      }
    } catch (error) {
      const first = parsed[0]!.message;
      logger.error(
        { err: error, subject: first.subject, seq: first.seq, messages: parsed.length },
        'message failed',
      );
      verdicts = parsed.map(() => 'retry');
    }
    await Promise.all(
      parsed.map(({ message }, index) =>
        verdicts[index] === 'ack'
          ? message.ack()
          : message.nak(jitteredDelayMs(options.retryDelayMs, Math.random)),
      ),
    );
  }

  const iterator = messages[Symbol.asyncIterator]();
  /** A read of the next message that a linger gave up waiting for: the next batch's first. */
  let unfinishedRead: Promise<IteratorResult<JsMsg>> | undefined;
  const read = () => {
    const next = unfinishedRead ?? iterator.next();
    unfinishedRead = undefined;
    return next;
  };

  /**
   * The next message, then whatever else has already arrived or arrives within `lingerMs`, up
   * to `maxBatch`.
   */
  async function nextBatch(): Promise<JsMsg[] | null> {
    const first = await read();
    if (first.done) return null;
    const batch = [first.value];
    const lingerEnds = performance.now() + lingerMs;
    while (batch.length < maxBatch) {
      const next = messages.getPending() > 0 ? await read() : await readWithin(lingerEnds);
      if (next === undefined || next.done) break;
      batch.push(next.value);
    }
    return batch;
  }

  /** The next message if it arrives before `deadline`; undefined (the read kept) if not. */
  async function readWithin(deadline: number): Promise<IteratorResult<JsMsg> | undefined> {
    const left = deadline - performance.now();
    if (left <= 0) return undefined;
    const next = read();
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      next,
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), left);
      }),
    ]);
    clearTimeout(timer);
    if (outcome === undefined) unfinishedRead = next;
    return outcome;
  }

  const consuming = (async () => {
    for (let batch = await nextBatch(); batch !== null; batch = await nextBatch()) {
      const handled = batch;
      await inConsumerSpan(definition.durableName, handled[0]!, () => process(handled));
    }
  })().catch((error: unknown) => logger.error({ err: error }, 'stream consumer stopped'));

  return {
    async stop() {
      await messages.close().catch(() => undefined);
      await consuming;
    },
  };
}
