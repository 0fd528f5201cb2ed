import { PRODUCTION_POLICY } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  ConfigError,
  loadConfig,
  mongoEnv,
  natsEnv,
  serviceEnv,
  webhookTargetEnv,
  webhookTargetPolicyFrom,
} from './config';

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

describe('webhookTargetEnv', () => {
  const targets = z.object(webhookTargetEnv);

  it('is the production policy when nothing is set', () => {
    expect(webhookTargetPolicyFrom(loadConfig('svc', targets, {}))).toEqual(PRODUCTION_POLICY);
  });

  it('reads the local stack settings into a frozen policy', () => {
    const policy = webhookTargetPolicyFrom(
      loadConfig('svc', targets, {
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8, ::1/128',
      }),
    );
    expect(policy).toEqual({ allowHttp: true, allowCidrs: ['127.0.0.0/8', '::1/128'] });
    expect(Object.isFrozen(policy.allowCidrs)).toBe(true);
  });

  it('names an entry that is not a CIDR', () => {
    expect(() =>
      loadConfig('svc', targets, { WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8,localhost' }),
    ).toThrow(/WEBHOOK_ALLOW_CIDRS: "localhost" is not a CIDR/);
  });
});
