import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type ConsumerDefinition, createTopology } from '@tamp/proto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import { assertStaysTrue } from '../../../test/support/stays-true';
import { connectNats, type NatsConnection, provisionTopology } from '../src/nats';
import { consumeStream, type StreamVerdict } from '../src/stream-consumer';

const infrastructure = isolatedInfrastructure();
const topology = createTopology(infrastructure.namespace);
const RETRY_DELAY_MS = 300;
const logger = pino({ level: 'silent' });
let nats: NatsConnection;

beforeAll(async () => {
  nats = await connectNats({ url: infrastructure.natsUrl, name: 'kit-stream-test', logger });
  await provisionTopology(nats, topology, 1);
});
afterAll(async () => {
  const streams = (await jetstreamManager(nats)).streams;
  await Promise.all(Object.values(topology.streams).map(({ name }) => streams.delete(name)));
  await nats.close();
});

/** Waits until the consumer has nothing pending or unacknowledged. */
async function drained({ stream, durableName }: { stream: string; durableName: string }) {
  const manager = await jetstreamManager(nats);
  await vi.waitFor(
    async () => {
      const info = await manager.consumers.info(stream, durableName);
      expect(info.num_ack_pending).toBe(0);
      expect(info.num_pending).toBe(0);
    },
    { timeout: 5_000, interval: 50 },
  );
}

/**
 * A batch consumer of `n`-messages that records the batches of those from `from` on (earlier
 * tests' messages are acknowledged without being counted), deciding each with `verdictFor`.
 */
function batchConsumer(options: {
  consumer: ConsumerDefinition;
  from: number;
  maxBatch: number;
  lingerMs?: number;
  verdictFor?: (n: number) => StreamVerdict;
}) {
  const batches: number[][] = [];
  const started = consumeStream({
    nats,
    consumer: options.consumer,
    schema: z.object({ n: z.number() }),
    retryDelayMs: RETRY_DELAY_MS,
    maxMessages: 50,
    maxBatch: options.maxBatch,
    lingerMs: options.lingerMs,
    logger,
    async handleBatch(messages) {
      const ours = messages.map(({ n }) => n).filter((n) => n >= options.from);
      if (ours.length > 0) batches.push(ours);
      return messages.map(({ n }) => options.verdictFor?.(n) ?? 'ack');
    },
  });
  return { batches, started };
}

describe('consumeStream', () => {
  it('acks, redelivers a retry or a failure after the delay, and terminates what does not parse', async () => {
    const calls: { n: number; at: number }[] = [];
    const firstCall = (n: number) => calls.filter((call) => call.n === n).length === 1;
    const consumer = await consumeStream({
      nats,
      consumer: topology.consumers.billing,
      schema: z.object({ n: z.number() }),
      retryDelayMs: RETRY_DELAY_MS,
      maxMessages: 10,
      logger,
      async handle({ n }): Promise<StreamVerdict> {
        calls.push({ n, at: Date.now() });
        if (n === 2 && firstCall(2)) return 'retry';
        if (n === 3 && firstCall(3)) throw new Error('a peer is down');
        return 'ack';
      },
    });
    try {
      const js = jetstream(nats);
      const subject = topology.subjects.events.completed;
      for (const body of ['{not json', '{"n":"x"}', '{"n":1}', '{"n":2}', '{"n":3}']) {
        await js.publish(subject, body);
      }
      await vi.waitFor(() => expect(calls).toHaveLength(5), { timeout: 10_000, interval: 50 });
      expect(calls.map((call) => call.n).sort()).toEqual([1, 2, 2, 3, 3]);
      for (const n of [2, 3]) {
        const [first, second] = calls.filter((call) => call.n === n);
        // The redelivery delay is jittered between half of retryDelayMs and all of it.
        expect(second!.at - first!.at).toBeGreaterThanOrEqual(RETRY_DELAY_MS / 2 - 50);
      }
      await drained(topology.consumers.billing);
      // The two bodies that do not parse were terminated, not redelivered: nothing more comes
      // in two retry delays, the time a redelivery would take.
      await assertStaysTrue(() => expect(calls).toHaveLength(5), {
        forMs: 2 * RETRY_DELAY_MS,
        what: 'no redelivery',
      });
    } finally {
      await consumer.stop();
    }
  });

  it('hands what arrived meanwhile to a batch handler, with one verdict per message', async () => {
    const retried = new Set<number>();
    const js = jetstream(nats);
    const subject = topology.subjects.events.completed;
    // Published before the consumer starts, so they are all waiting at once; the earlier test's
    // messages (n < 100) come first.
    for (let n = 100; n < 120; n++) await js.publish(subject, JSON.stringify({ n }));
    const { batches, started } = batchConsumer({
      consumer: topology.consumers.webhook,
      from: 100,
      maxBatch: 8,
      verdictFor(n) {
        if (n !== 105 || retried.has(n)) return 'ack';
        retried.add(n);
        return 'retry';
      },
    });
    const consumer = await started;
    try {
      const handled = () => batches.flat();
      await vi.waitFor(() => expect(handled()).toHaveLength(21), { timeout: 10_000, interval: 50 });
      expect(handled().sort()).toEqual(
        [...Array.from({ length: 20 }, (_, index) => 100 + index), 105].sort(),
      );
      expect(Math.max(...batches.map((batch) => batch.length))).toBeGreaterThan(1);
      expect(Math.max(...batches.map((batch) => batch.length))).toBeLessThanOrEqual(8);
      await drained(topology.consumers.webhook);
    } finally {
      await consumer.stop();
    }
  });

  it('with a linger, gathers messages arriving one by one into one batch, and on stop handles what it held', async () => {
    const js = jetstream(nats);
    const subject = topology.subjects.events.completed;
    const { batches, started } = batchConsumer({
      consumer: topology.consumers.billing,
      from: 200,
      maxBatch: 50,
      lingerMs: 1_500,
    });
    const consumer = await started;
    let stopped = false;
    try {
      for (let n = 200; n < 210; n++) {
        await js.publish(subject, JSON.stringify({ n }));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await vi.waitFor(() => expect(batches.flat()).toHaveLength(10), {
        timeout: 10_000,
        interval: 50,
      });
      // Each arrived 20 ms after the one before, within the first one's linger.
      expect(batches).toEqual([Array.from({ length: 10 }, (_, index) => 200 + index)]);
      await drained(topology.consumers.billing);
      // Held in a linger when the consumer stops: handled and acknowledged, not left behind.
      await js.publish(subject, JSON.stringify({ n: 300 }));
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(batches).toHaveLength(1);
      await consumer.stop();
      stopped = true;
      expect(batches).toEqual([Array.from({ length: 10 }, (_, index) => 200 + index), [300]]);
      await drained(topology.consumers.billing);
    } finally {
      if (!stopped) await consumer.stop();
    }
  });
});
