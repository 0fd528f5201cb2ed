import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from './errors';

/** The public envelopes. Every payload of the API is wrapped in one of these. */
export const successEnvelope = <Payload extends z.ZodType>(payload: Payload) =>
  z.object({ success: z.literal(true), data: payload });

export const errorEnvelope = z.object({
  success: z.literal(false),
  error: z.object({
    code: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]),
    message: z.string(),
    details: z.unknown().optional(),
  }),
});
export type ErrorEnvelope = z.infer<typeof errorEnvelope>;
