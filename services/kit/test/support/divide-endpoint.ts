import type { EndpointDefinition } from '@tamp/proto';
import { z } from 'zod';

/** A small endpoint for the request/reply tests: a ÷ b, served by each test its own way. */
export const divide: EndpointDefinition<
  z.ZodType<{ a: number; b: number }>,
  z.ZodType<{ quotient: number }>
> = {
  service: 'maths',
  name: 'divide',
  request: z.object({ a: z.number(), b: z.number() }),
  response: z.object({ quotient: z.number() }),
};
