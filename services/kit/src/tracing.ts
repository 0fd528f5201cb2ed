import {
  type Context,
  context,
  propagation,
  type TextMapGetter,
  type TextMapSetter,
} from '@opentelemetry/api';
import type { Logger } from 'pino';

/**
 * Starts the OpenTelemetry SDK only when an OTLP endpoint is configured: without one, tracing
 * costs nothing and sends nothing (no phone-home on machines without a collector).
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
    traceExporter: new OTLPTraceExporter({
      url: `${options.endpoint.replace(/\/$/, '')}/v1/traces`,
    }),
  });
  sdk.start();
  options.logger.info({ endpoint: options.endpoint }, 'tracing enabled');
  return () => sdk.shutdown();
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
