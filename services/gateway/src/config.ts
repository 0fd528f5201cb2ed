import { envPort, natsEnv, serviceEnv } from '@tamp/kit';
import { z } from 'zod';

export const configSchema = z.object({
  ...serviceEnv,
  ...natsEnv,
  /** Public API. */
  PORT: envPort.default(8080),
  HOST: z.string().default('0.0.0.0'),
  /** Admin API: internal only, never behind the public ingress. */
  ADMIN_PORT: envPort.default(8081),
  ADMIN_HOST: z.string().default('127.0.0.1'),
});
export type Config = z.output<typeof configSchema>;
