import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, loadConfig, mongoEnv, natsEnv, serviceEnv } from './config';

const schema = z.object({ ...serviceEnv, ...natsEnv, ...mongoEnv });

describe('loadConfig', () => {
  it('applies defaults and coerces numbers', () => {
    const config = loadConfig('svc', schema, {
      NATS_URL: 'nats://x:4222',
      MONGO_URL: 'mongodb://x/',
    });
    expect(config.OPS_PORT).toBe(9090);
    expect(config.LOG_LEVEL).toBe('info');
    expect(config.MONGO_DATABASE).toBe('tamp');
    expect(
      loadConfig('svc', schema, { NATS_URL: 'n', MONGO_URL: 'mongodb://x/', OPS_PORT: '1234' })
        .OPS_PORT,
    ).toBe(1234);
  });

  it('names every missing or bad variable at once', () => {
    try {
      loadConfig('svc', schema, {
        MONGO_URL: 'postgres://nope',
        OPS_PORT: 'eighty',
        LOG_LEVEL: 'loud',
      });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      const { problems, message } = error as ConfigError;
      expect(problems).toHaveLength(4);
      expect(message).toMatch(/NATS_URL: is required but not set/);
      expect(message).toMatch(/MONGO_URL: must be a mongodb:\/\/ URL/);
      expect(message).toMatch(/OPS_PORT/);
      expect(message).toMatch(/LOG_LEVEL/);
    }
  });
});
