import { natsEnv, serviceEnv } from '@tamp/kit';
import { z } from 'zod';

export const configSchema = z.object({ ...serviceEnv, ...natsEnv });
export type Config = z.output<typeof configSchema>;
