import { loadConfig, webhookTargetPolicyFrom } from '@tamp/kit';
import { PRODUCTION_POLICY } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HTTP_LIMITS } from './api/http-server';
import { configSchema, httpLimitsFrom } from './config';

const REQUIRED = {
  NATS_URL: 'nats://127.0.0.1:4222',
  S3_ENDPOINT: 'http://127.0.0.1:9000',
  S3_ACCESS_KEY: 'access',
  S3_SECRET_KEY: 'secret',
};

describe('gateway configuration', () => {
  it('bounds every request and connection by default, and sends webhooks by the production policy', () => {
    const config = loadConfig('gateway', configSchema, REQUIRED);
    expect(httpLimitsFrom(config)).toEqual(DEFAULT_HTTP_LIMITS);
    expect(webhookTargetPolicyFrom(config)).toEqual(PRODUCTION_POLICY);
  });

  it('reads the limits and the webhook policy from the environment', () => {
    const config = loadConfig('gateway', configSchema, {
      ...REQUIRED,
      HTTP_HEADERS_TIMEOUT_MS: '5000',
      HTTP_REQUEST_TIMEOUT_MS: '30000',
      MAX_CONNECTIONS_PER_ADDRESS: '0',
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    });
    expect(httpLimitsFrom(config)).toMatchObject({
      headersTimeoutMs: 5_000,
      requestTimeoutMs: 30_000,
      maxConnectionsPerAddress: 0,
    });
    expect(webhookTargetPolicyFrom(config)).toEqual({
      allowHttp: true,
      allowCidrs: ['127.0.0.0/8'],
    });
  });

  it('refuses a time limit of 0, which would mean none', () => {
    expect(() =>
      loadConfig('gateway', configSchema, { ...REQUIRED, HTTP_REQUEST_TIMEOUT_MS: '0' }),
    ).toThrow(/HTTP_REQUEST_TIMEOUT_MS/);
  });
});
