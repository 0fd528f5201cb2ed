import { loadConfig } from '@tamp/kit';
import { LIMITS, PRODUCTION_POLICY } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { configSchema, gatewaySettingsFrom } from './config';

const REQUIRED = {
  NATS_URL: 'nats://127.0.0.1:4222',
  S3_ENDPOINT: 'http://127.0.0.1:9000',
  S3_ACCESS_KEY: 'access',
  S3_SECRET_KEY: 'secret',
};

describe('gateway configuration', () => {
  it('bounds every request and connection by default, and sends webhooks by the production policy', () => {
    const settings = gatewaySettingsFrom(loadConfig('gateway', configSchema, REQUIRED));
    expect(settings.httpLimits).toEqual({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 72_000,
      connectionTimeoutMs: 120_000,
      maxConnections: 10_000,
      maxConnectionsPerAddress: 256,
    });
    expect(settings.webhookTargets).toEqual(PRODUCTION_POLICY);
    expect(settings).toMatchObject({
      publicUrl: undefined,
      adminToken: undefined,
      authCacheTtlMs: 4_000,
      createJobBudgetMs: LIMITS.createJobBudgetMs,
      maxConcurrentCreations: 256,
    });
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
    const settings = gatewaySettingsFrom(config);
    expect(settings.httpLimits).toMatchObject({
      headersTimeoutMs: 5_000,
      requestTimeoutMs: 30_000,
      maxConnectionsPerAddress: 0,
    });
    expect(settings.webhookTargets).toEqual({
      allowHttp: true,
      allowCidrs: ['127.0.0.0/8'],
    });
  });

  it('reads the public URL the OpenAPI document names, without a trailing slash', () => {
    const config = loadConfig('gateway', configSchema, {
      ...REQUIRED,
      PUBLIC_URL: 'https://api.tamp.test/',
    });
    expect(gatewaySettingsFrom(config).publicUrl).toBe('https://api.tamp.test');
    expect(() =>
      loadConfig('gateway', configSchema, { ...REQUIRED, PUBLIC_URL: 'api.tamp.test' }),
    ).toThrow(/PUBLIC_URL/);
  });

  it('refuses a time limit of 0, which would mean none', () => {
    expect(() =>
      loadConfig('gateway', configSchema, { ...REQUIRED, HTTP_REQUEST_TIMEOUT_MS: '0' }),
    ).toThrow(/HTTP_REQUEST_TIMEOUT_MS/);
  });
});
