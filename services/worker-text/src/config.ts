import { natsEnv, s3Env, serviceEnv } from '@tamp/kit';
import { z } from 'zod';

export const configSchema = z.object({ ...serviceEnv, ...natsEnv, ...s3Env });
export type Config = z.output<typeof configSchema>;
