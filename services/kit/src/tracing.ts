import {
  type Attributes,
  type Context,
  context,
  createContextKey,
  isSpanContextValid,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  type TimeInput,
  trace,
} from '@opentelemetry/api';
import type { Logger } from 'pino';

/**
 * Starts the OpenTelemetry SDK only when an OTLP endpoint is configured: without one, tracing
 * costs nothing and sends nothing (no phone-home on machines without a collector). The exporter
 * and the sampler read the standard variables themselves (OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_TRACES_SAMPLER, OTEL_BSP_*); the library
 * instrumentations were registered before, by the service's first import (instrument.ts).
 */
export async function startTracing(options: {
  service: string;
  endpoint: string | undefined;
  logger: Logger;
}): Promise<() => Promise<void>> {
  if (options.endpoint === undefined) return async () => {};
  const [{ NodeSDK }, { OTLPTraceExporter }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
  ]);
  const sdk = new NodeSDK({
    serviceName: options.service,
    traceExporter: new OTLPTraceExporter(),
    instrumentations: [],
  });
  sdk.start();
  options.logger.info({ endpoint: options.endpoint }, 'tracing enabled');
  return () => sdk.shutdown();
}

/**
 * Spans are made through the global API: before `startTracing` (and always without an
 * endpoint) it is the no-op tracer, whose spans cost a few allocations and record nothing.
 */
const tracer = () => trace.getTracer('tamp');

export interface SpanSettings {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The context the span is a child of; default the active one. */
  parent?: Context;
}

/**
 * Runs `work` inside a new active span (so spans, log lines and NATS messages made by it belong
 * to it) and ends the span when `work` settles; a thrown error is recorded on the span, which is
 * marked failed, and rethrown.
 */
export function inSpan<T>(
  name: string,
  settings: SpanSettings,
  work: (span: Span) => Promise<T>,
): Promise<T> {
  return tracer().startActiveSpan(
    name,
    { kind: settings.kind ?? SpanKind.INTERNAL, attributes: settings.attributes },
    settings.parent ?? context.active(),
    async (span) => {
      try {
        return await work(span);
      } catch (error) {
        markFailed(span, error);
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/** Records `error` on `span` and marks the span failed (for failures that are not thrown). */
export function markFailed(span: Span, error: unknown, time?: TimeInput): void {
  const exception = error instanceof Error ? error : new Error(String(error));
  span.recordException(exception, time);
  span.setStatus({ code: SpanStatusCode.ERROR, message: exception.message });
}

/** Work that was timed where no span could be made (a worker thread), to show as a span after. */
export interface FinishedWork {
  name: string;
  attributes?: Attributes;
  /** When it started and ended, in milliseconds since the epoch. */
  startTime: number;
  endTime: number;
  /** Why it failed, if it did: recorded on the span, which is marked failed. */
  error?: unknown;
}

/**
 * Records `work` as a span, child of the active span, with the times it really ran: for steps
 * that ran in a worker thread, where the main thread's trace context is not available.
 */
export function recordFinishedSpan(work: FinishedWork): void {
  const span = tracer().startSpan(
    work.name,
    { kind: SpanKind.INTERNAL, attributes: work.attributes, startTime: work.startTime },
    context.active(),
  );
  if (work.error !== undefined) markFailed(span, work.error, work.endTime);
  span.end(work.endTime);
}

/** Marks the active span, if any, failed: for failures that are recorded rather than thrown. */
export function markActiveSpanFailed(error: unknown): void {
  const span = trace.getActiveSpan();
  if (span !== undefined) markFailed(span, error);
}

/** Adds attributes to the active span, if any (e.g. the account a request was made for). */
export function annotateActiveSpan(attributes: Attributes): void {
  trace.getActiveSpan()?.setAttributes(attributes);
}

/**
 * Names the active HTTP server span after the route that matched (`POST /v1/jobs`), as the
 * HTTP instrumentation alone cannot know it.
 */
export function nameHttpServerSpan(method: string, route: string | undefined): void {
  const span = trace.getActiveSpan();
  if (span === undefined || route === undefined) return;
  span.setAttribute('http.route', route);
  span.updateName(`${method} ${route}`);
}

/**
 * Publishes a NATS or JetStream message inside a PRODUCER span whose context travels in the
 * message's headers, so the consumer's span joins the same trace (see `inConsumerSpan`).
 * `destination` is the subject without its namespace (`destinationOf`).
 */
export function inProducerSpan<T>(
  destination: string,
  headers: HeaderCarrier,
  publish: () => Promise<T>,
): Promise<T> {
  return inSpan(
    `publish ${destination}`,
    { kind: SpanKind.PRODUCER, attributes: messagingAttributes(destination, 'publish') },
    async () => {
      injectTraceContext(headers);
      return publish();
    },
  );
}

/**
 * Handles a consumed message inside a CONSUMER span, child of the producer's span (its context
 * came in the headers). Named after the consumer (`process worker-image`, `process billing`):
 * what took the message, and a name of bounded cardinality whatever the namespace.
 */
export function inConsumerSpan<T>(
  consumer: string,
  message: { subject: string; headers?: HeaderCarrier },
  work: (span: Span) => Promise<T>,
): Promise<T> {
  return inSpan(
    `process ${consumer}`,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        ...messagingAttributes(message.subject, 'process'),
        'messaging.consumer.group.name': consumer,
      },
      parent: extractTraceContext(message.headers),
    },
    work,
  );
}

/** A subject without the namespace that prefixes it: a span name of bounded cardinality. */
export function destinationOf(topology: { namespace: string }, subject: string): string {
  const prefix = `${topology.namespace}.`;
  return topology.namespace !== '' && subject.startsWith(prefix)
    ? subject.slice(prefix.length)
    : subject;
}

function messagingAttributes(destination: string, operation: string): Attributes {
  return {
    'messaging.system': 'nats',
    'messaging.destination.name': destination,
    'messaging.operation.type': operation,
  };
}

/**
 * `trace_id` and `span_id` of the active span, for every log line written inside one (the
 * logger's mixin); empty outside a span and whenever tracing is off.
 */
export function activeTraceFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getActiveSpan();
  if (span === undefined) return {};
  const spanContext = span.spanContext();
  if (!isSpanContextValid(spanContext)) return {};
  return { trace_id: spanContext.traceId, span_id: spanContext.spanId };
}

/**
 * The active trace context as plain fields (W3C `traceparent`), to keep with work that is done
 * later, outside the span (a webhook delivery scheduled in the database): see `storedContext`.
 */
export function contextToStore(): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}

/** The context kept by `contextToStore`, for the spans of the work done later. */
export function storedContext(carrier: Record<string, string> | undefined): Context {
  return carrier === undefined ? ROOT_CONTEXT : propagation.extract(ROOT_CONTEXT, carrier);
}

const TRACE_CONTEXT_WITHHELD = createContextKey('tamp.trace-context-withheld');

/**
 * Runs `work` (synchronously: an undici request is created in the call) so that the HTTP
 * requests it starts carry no trace context: no `traceparent`, `tracestate` or `baggage` goes to a
 * third party (a customer's webhook receiver) that must not learn our trace ids. The undici
 * instrumentation ignores such requests (instrumentation.ts), so they get no client span either:
 * the caller's own span (`webhook deliver`) is the attempt's record.
 */
export function withTraceContextWithheld<T>(work: () => T): T {
  return context.with(context.active().setValue(TRACE_CONTEXT_WITHHELD, true), work);
}

/** Whether the active context was set up by `withTraceContextWithheld`. */
export function isTraceContextWithheld(): boolean {
  return context.active().getValue(TRACE_CONTEXT_WITHHELD) === true;
}

/** The part of NATS' MsgHdrs that trace propagation needs. */
export interface HeaderCarrier {
  get(key: string): string;
  set(key: string, value: string): void;
  keys(): string[];
}

const setter: TextMapSetter<HeaderCarrier> = {
  set: (carrier, key, value) => carrier.set(key, value),
};
const getter: TextMapGetter<HeaderCarrier> = {
  get: (carrier, key) => carrier.get(key) || undefined,
  keys: (carrier) => carrier.keys(),
};

/** Writes the active trace context into outgoing NATS headers. */
export function injectTraceContext(headers: HeaderCarrier, from: Context = context.active()): void {
  propagation.inject(from, headers, setter);
}

/** Reads the trace context of an incoming NATS message, so its handling joins the same trace. */
export function extractTraceContext(headers: HeaderCarrier | undefined): Context {
  return headers === undefined
    ? context.active()
    : propagation.extract(context.active(), headers, getter);
}
