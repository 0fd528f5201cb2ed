import { headers as natsHeaders } from '@nats-io/nats-core';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { node } from '@opentelemetry/sdk-node';
import { createTopology, type EndpointDefinition, ServiceError } from '@tamp/proto';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import { createLogger } from '../src/logger';
import { connectNats, type NatsConnection } from '../src/nats';
import { Rpc } from '../src/rpc';
import {
  contextToStore,
  inConsumerSpan,
  inProducerSpan,
  inSpan,
  isTraceContextWithheld,
  recordFinishedSpan,
  storedContext,
  withTraceContextWithheld,
} from '../src/tracing';

/**
 * Spans of the kit's helpers and of Rpc over a real NATS server, recorded by the SDK's own
 * in-memory exporter (the whole path to a real collector is test/e2e/tracing.test.ts).
 */
const exporter = new node.InMemorySpanExporter();
const provider = new node.NodeTracerProvider({
  spanProcessors: [new node.SimpleSpanProcessor(exporter)],
});
provider.register();

const infrastructure = isolatedInfrastructure();
const quiet = pino({ level: 'silent' });
const echo: EndpointDefinition<z.ZodType<{ word: string }>, z.ZodType<{ word: string }>> = {
  service: 'echo',
  name: 'say',
  request: z.object({ word: z.string() }),
  response: z.object({ word: z.string() }),
};
let server: NatsConnection;
let client: NatsConnection;
let rpc: Rpc;

beforeAll(async () => {
  const topology = createTopology(infrastructure.namespace);
  server = await connectNats({ url: infrastructure.natsUrl, name: 'server', logger: quiet });
  client = await connectNats({ url: infrastructure.natsUrl, name: 'client', logger: quiet });
  new Rpc(server, topology, quiet).serve(echo, async ({ word }) => {
    if (word === 'fail') throw new ServiceError('JOB_NOT_FOUND', 'no');
    // A span made by the handler: it must be a child of the server span.
    return inSpan('inner', {}, async () => ({ word }));
  });
  await server.flush();
  rpc = new Rpc(client, topology, quiet);
});
afterAll(async () => {
  await Promise.all([server.close(), client.close()]);
  await provider.shutdown();
});
beforeEach(() => exporter.reset());

const spanNamed = (name: string, kind?: SpanKind) => {
  const found = exporter
    .getFinishedSpans()
    .find((span) => span.name === name && (kind === undefined || span.kind === kind));
  if (found === undefined) throw new Error(`no span ${name}`);
  return found;
};

describe('tracing', () => {
  it('makes one trace of a call: client span, server span its child, handler spans below', async () => {
    await inSpan('request', {}, () => rpc.call(echo, { word: 'hi' }));
    const root = spanNamed('request');
    const callSpan = spanNamed('echo.say', SpanKind.CLIENT);
    const serverSpan = spanNamed('echo.say', SpanKind.SERVER);
    const inner = spanNamed('inner');
    expect(callSpan.parentSpanContext?.spanId).toBe(root.spanContext().spanId);
    expect(serverSpan.parentSpanContext?.spanId).toBe(callSpan.spanContext().spanId);
    expect(inner.parentSpanContext?.spanId).toBe(serverSpan.spanContext().spanId);
    const traceIds = new Set(exporter.getFinishedSpans().map((s) => s.spanContext().traceId));
    expect(traceIds.size).toBe(1);
    expect(serverSpan.attributes['rpc.method']).toBe('say');
  });

  it('marks both sides of a failed call as errors', async () => {
    await expect(rpc.call(echo, { word: 'fail' })).rejects.toThrow('no');
    expect(spanNamed('echo.say', SpanKind.CLIENT).status.code).toBe(SpanStatusCode.ERROR);
    const serverSpan = spanNamed('echo.say', SpanKind.SERVER);
    expect(serverSpan.status.code).toBe(SpanStatusCode.ERROR);
    expect(serverSpan.attributes['tamp.error_code']).toBe('JOB_NOT_FOUND');
  });

  it('makes the consumer of a message a child of its producer, through the headers', async () => {
    const headers = natsHeaders();
    await inProducerSpan('jobs.image', headers, async () => undefined);
    // What a consumer on another connection sees: only the headers travel.
    await inConsumerSpan(
      'worker-image',
      { subject: 'ns.jobs.image', headers },
      async () => undefined,
    );
    const producer = spanNamed('publish jobs.image');
    const consumer = spanNamed('process worker-image');
    expect(producer.kind).toBe(SpanKind.PRODUCER);
    expect(consumer.kind).toBe(SpanKind.CONSUMER);
    expect(consumer.spanContext().traceId).toBe(producer.spanContext().traceId);
    expect(consumer.parentSpanContext?.spanId).toBe(producer.spanContext().spanId);
  });

  it('parents work done later on the context stored with it', async () => {
    const stored = await inSpan('schedule', {}, async () => contextToStore());
    // Later, from a timer: no span is active any more.
    await inSpan('deliver', { parent: storedContext(stored) }, async () => undefined);
    expect(spanNamed('deliver').parentSpanContext?.spanId).toBe(
      spanNamed('schedule').spanContext().spanId,
    );
    await inSpan('unrelated', { parent: storedContext(undefined) }, async () => undefined);
    expect(spanNamed('unrelated').parentSpanContext).toBeUndefined();
  });

  it('records a thrown error on the span and rethrows it', async () => {
    await expect(
      inSpan('attempt', {}, async () => {
        throw new Error('ffmpeg exited with 1');
      }),
    ).rejects.toThrow('ffmpeg exited with 1');
    const span = spanNamed('attempt');
    expect(span.status).toMatchObject({ code: SpanStatusCode.ERROR });
    expect(span.events.map((event) => event.name)).toContain('exception');
  });

  it('records work timed elsewhere as a child of the active span, with its own times', async () => {
    const startTime = Date.now() - 50;
    await inSpan('pipeline', {}, async () => {
      recordFinishedSpan({
        name: 'step done',
        attributes: { 'text.length_in': 4 },
        startTime,
        endTime: startTime + 12.5,
      });
      recordFinishedSpan({
        name: 'step failed',
        startTime: startTime + 20,
        endTime: startTime + 21,
        error: new RangeError('intensity 101'),
      });
    });
    const parent = spanNamed('pipeline').spanContext();
    const done = spanNamed('step done');
    const failed = spanNamed('step failed');
    for (const span of [done, failed]) {
      expect(span.spanContext().traceId).toBe(parent.traceId);
      expect(span.parentSpanContext?.spanId).toBe(parent.spanId);
    }
    const millis = ([seconds, nanos]: [number, number]) => seconds * 1000 + nanos / 1e6;
    expect(millis(done.startTime)).toBeCloseTo(startTime, 3);
    expect(millis(done.duration)).toBeCloseTo(12.5, 3);
    expect(done.attributes).toEqual({ 'text.length_in': 4 });
    expect(done.status.code).not.toBe(SpanStatusCode.ERROR);
    expect(failed.status).toMatchObject({ code: SpanStatusCode.ERROR, message: 'intensity 101' });
    expect(failed.events.map((event) => event.name)).toEqual(['exception']);
  });

  it('withholds the trace context only inside withTraceContextWithheld', async () => {
    await inSpan('deliver', {}, async () => {
      expect(isTraceContextWithheld()).toBe(false);
      expect(withTraceContextWithheld(() => isTraceContextWithheld())).toBe(true);
      expect(isTraceContextWithheld()).toBe(false);
    });
  });

  it('writes trace_id and span_id on every log line inside a span, and none outside', async () => {
    const lines: string[] = [];
    const logger = createLogger('test', 'info', { write: (line: string) => lines.push(line) });
    logger.info('outside');
    let ids: { traceId: string; spanId: string } | undefined;
    await inSpan('logged', {}, async () => {
      ids = trace.getActiveSpan()!.spanContext();
      logger.child({ jobId: 'job_1' }).info('inside');
    });
    const [outside, inside] = lines.map((line) => JSON.parse(line));
    expect(outside).not.toHaveProperty('trace_id');
    expect(inside).toMatchObject({ trace_id: ids!.traceId, span_id: ids!.spanId, jobId: 'job_1' });
  });
});
