/**
 * Imported for its effect, as the very first import of every service's main.ts
 * (`import '@tamp/kit/instrument'`): the OpenTelemetry library instrumentations patch a library
 * when it is loaded, so they must be registered before any other module of the service loads
 * one (instrumentation.ts). Being first is the whole point, so this module cannot wait for the
 * service's configuration: like loadConfig, it is the process's bootstrap and reads the
 * environment itself, the only place outside a config schema that does. The SDK itself starts
 * later, from the parsed configuration (runService → startTracing), with the same variable.
 */
import { registerLibraryInstrumentations } from './instrumentation';

if (process.env.OTEL_EXPORTER_OTLP_ENDPOINT) registerLibraryInstrumentations();
