import { PRODUCTION_POLICY } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  ConfigError,
  loadConfig,
  mongoEnv,
  natsEnv,
  objectStoreConfigFrom,
  s3Env,
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

describe('s3Env', () => {
  const storage = z.object({ ...serviceEnv, ...s3Env });
  const endpoint = { S3_ENDPOINT: 'http://minio:9000' };

  it('takes static keys as a pair, or none for the AWS credential chain', () => {
    const withKeys = objectStoreConfigFrom(
      loadConfig('svc', storage, { ...endpoint, S3_ACCESS_KEY: 'key', S3_SECRET_KEY: 'secret' }),
    );
    expect(withKeys).toMatchObject({ accessKey: 'key', secretKey: 'secret' });
    const withoutKeys = objectStoreConfigFrom(loadConfig('svc', storage, endpoint));
    expect(withoutKeys.accessKey).toBeUndefined();
    expect(withoutKeys.secretKey).toBeUndefined();
  });

  it('refuses one key without the other, naming the missing one, with the other problems', () => {
    for (const [given, missing] of [
      ['S3_ACCESS_KEY', 'S3_SECRET_KEY'],
      ['S3_SECRET_KEY', 'S3_ACCESS_KEY'],
    ] as const) {
      const error = (() => {
        try {
          loadConfig('svc', storage, { ...endpoint, [given]: 'x', OPS_PORT: 'eighty' });
        } catch (caught) {
          return caught;
        }
      })();
      expect(error).toBeInstanceOf(ConfigError);
      const { problems } = error as ConfigError;
      expect(problems).toHaveLength(2);
      expect(problems[0]).toMatch(/^OPS_PORT/);
      expect(problems[1]).toBe(
        `${missing}: is not set while ${given} is. Set both for static keys, or neither to take ` +
          'credentials from the AWS credential chain (IRSA, EKS Pod Identity, instance role)',
      );
    }
  });

  it('leaves the rule to schemas that read S3', () => {
    expect(() =>
      loadConfig('svc', z.object(serviceEnv), { S3_ACCESS_KEY: 'shared-config-map' }),
    ).not.toThrow();
  });
});
