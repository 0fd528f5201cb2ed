import { mongoEnv, natsEnv, serviceEnv } from '@tamp/kit';
import { z } from 'zod';

export const configSchema = z.object({ ...serviceEnv, ...natsEnv, ...mongoEnv });
export type Config = z.output<typeof configSchema>;
