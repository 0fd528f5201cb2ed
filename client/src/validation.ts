import type { z } from 'zod';
import { ValidationError } from './errors';

/**
 * Checks a request against proto's schema before it is sent, so a mistake costs no request and
 * reads like the server's own VALIDATION_ERROR (`details`: each issue with its path). Returns
 * the parsed value (defaults filled in); the request itself is sent as the caller wrote it.
 */
export function validated<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  what: string,
): z.output<Schema> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const details = result.error.issues.map((issue) => ({
    path: issue.path.map(String).join('.'),
    message: issue.message,
  }));
  const summary = details
    .map((issue) => (issue.path === '' ? issue.message : `${issue.path}: ${issue.message}`))
    .join('; ');
  // Status 0: refused by the client, no request was sent.
  throw new ValidationError('VALIDATION_ERROR', {
    message: `${what} is not valid: ${summary}`,
    status: 0,
    details,
  });
}
