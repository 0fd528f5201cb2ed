import { createRequire, syncBuiltinESMExports } from 'node:module';
import { isTraceContextWithheld } from './tracing';

/** Requests nobody needs a trace of: probes and scrapes of the ops server. */
const OPS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * The maintained OpenTelemetry instrumentations of the libraries Tamp talks through: node:http
 * (the gateway's requests as SERVER spans, S3 calls of the MinIO client as CLIENT spans),
 * mongodb (each command) and undici (outgoing fetch; not webhook deliveries, see below). They
 * patch a library when it is loaded, so they must be registered before any service module loads
 * one: instrument.ts calls this, imported first by every service's main, and only when tracing
 * is configured, so a service without an endpoint loads none of them. They are loaded
 * synchronously (a top-level await would let sibling modules run first). Their spans reach the
 * SDK that `startTracing` starts once the service knows its name.
 */
export function registerLibraryInstrumentations(): void {
  const require = createRequire(import.meta.url);
  const { registerInstrumentations } =
    require('@opentelemetry/instrumentation') as typeof import('@opentelemetry/instrumentation');
  const { HttpInstrumentation } =
    require('@opentelemetry/instrumentation-http') as typeof import('@opentelemetry/instrumentation-http');
  const { MongoDBInstrumentation } =
    require('@opentelemetry/instrumentation-mongodb') as typeof import('@opentelemetry/instrumentation-mongodb');
  const { UndiciInstrumentation } =
    require('@opentelemetry/instrumentation-undici') as typeof import('@opentelemetry/instrumentation-undici');
  const instrumentations = [
    new HttpInstrumentation({
      ignoreIncomingRequestHook: (request) => OPS_PATHS.has((request.url ?? '').split('?')[0]!),
      // Authorization headers are never recorded: the instrumentation records none by default.
    }),
    new MongoDBInstrumentation({ dbStatementSerializer: () => '' }),
    new UndiciInstrumentation({
      // Requests to third parties (webhook deliveries, `withTraceContextWithheld`) must not carry
      // our trace context. Ignoring them is the instrumentation's only way to send a request
      // without it: it injects the context last, after every hook, so no hook can remove the
      // headers (and a propagator wrapper would have to rebuild the SDK's OTEL_PROPAGATORS
      // handling). The request is created synchronously inside the caller's context, so the
      // flag is visible here.
      ignoreRequestHook: () => isTraceContextWithheld(),
      // A URL's query may carry a token (a webhook receiver's own, say): it is never recorded.
      startSpanHook: (request) => {
        const url = new URL(request.path, request.origin);
        return { 'url.full': `${url.origin}${url.pathname}`, 'url.query': '' };
      },
    }),
  ];
  registerInstrumentations({ instrumentations });
  // A built-in module is patched when it is next required: require node:http and node:https
  // now (processes without fastify would never), and update the bindings of ES modules that
  // import them (the MinIO client's S3 calls), which would otherwise keep the originals.
  require('node:http');
  require('node:https');
  syncBuiltinESMExports();
}
