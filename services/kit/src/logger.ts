import { type Logger, pino } from 'pino';

export type { Logger };

/** Structured JSON logs; secrets that may pass through request logs are redacted. */
export function createLogger(service: string, level: string): Logger {
  return pino({
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', '*.apiKey', '*.webhookSecret'],
      censor: '[redacted]',
    },
  });
}
