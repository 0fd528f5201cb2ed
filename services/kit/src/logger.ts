import { type DestinationStream, type Logger, pino } from 'pino';
import { activeTraceFields } from './tracing';

export type { Logger };

/**
 * Secrets that may pass through logs: request credentials, API keys, webhook signing secrets
 * (an account view carries the current one and, during a rotation, the previous one), and the
 * dashboard's session tokens, session cookies and one-time sign-in link tokens, whether logged as
 * a field or one level down in a logged object.
 */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  'apiKey',
  '*.apiKey',
  'webhookSecret',
  '*.webhookSecret',
  'previousWebhookSecret',
  '*.previousWebhookSecret',
  'req.headers.cookie',
  'headers.cookie',
  'sessionToken',
  '*.sessionToken',
  'token',
  '*.token',
];

/**
 * Structured JSON logs, to stdout unless a destination is given; secrets are redacted. A line
 * written inside a span carries its `trace_id` and `span_id`, so logs and traces join.
 */
export function createLogger(
  service: string,
  level: string,
  destination?: DestinationStream,
): Logger {
  const options = {
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    mixin: activeTraceFields,
  };
  return destination === undefined ? pino(options) : pino(options, destination);
}
