import { loadConfig } from '@tamp/kit';
import { checkTargetUrl, PRODUCTION_POLICY } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { configSchema, webhookSettingsFrom } from './config';
import { DEFAULT_RETRY_SCHEDULE_MS } from './domain/retry-schedule';

const required = { NATS_URL: 'nats://127.0.0.1:4222', MONGO_URL: 'mongodb://127.0.0.1:27017' };

describe('webhook configuration', () => {
  it('defaults to the production policy, the documented schedule and a 10 s deadline', () => {
    const config = loadConfig('webhook', configSchema, required);
    const settings = webhookSettingsFrom(config);
    expect(settings.targetPolicy).toEqual(PRODUCTION_POLICY);
    expect(config.WEBHOOK_RETRY_SCHEDULE_MS).toEqual(DEFAULT_RETRY_SCHEDULE_MS);
    expect(config.WEBHOOK_RETRY_SCHEDULE_MS).toEqual([
      15_000, 300_000, 1_800_000, 7_200_000, 18_000_000,
    ]);
    expect(config.WEBHOOK_TIMEOUT_MS).toBe(10_000);
    expect(checkTargetUrl('http://127.0.0.1:9000/', settings.targetPolicy).allowed).toBe(false);
    expect(settings).toMatchObject({
      timeoutMs: 10_000,
      pollIntervalMs: 5_000,
      maxConcurrentAttempts: 16,
    });
  });

  it('reads the local stack settings: http and loopback allowed', () => {
    const config = loadConfig('webhook', configSchema, {
      ...required,
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8, ::1/128',
      WEBHOOK_RETRY_SCHEDULE_MS: '50,50,50,50,50',
      WEBHOOK_TIMEOUT_MS: '300',
    });
    const policy = webhookSettingsFrom(config).targetPolicy;
    expect(policy).toEqual({ allowHttp: true, allowCidrs: ['127.0.0.0/8', '::1/128'] });
    expect(checkTargetUrl('http://127.0.0.1:9000/', policy).allowed).toBe(true);
    expect(checkTargetUrl('http://169.254.169.254/', policy).allowed).toBe(false);
    expect(config.WEBHOOK_RETRY_SCHEDULE_MS).toEqual([50, 50, 50, 50, 50]);
    expect(config.WEBHOOK_TIMEOUT_MS).toBe(300);
  });

  it('names every bad webhook variable', () => {
    expect(() =>
      loadConfig('webhook', configSchema, {
        ...required,
        WEBHOOK_ALLOW_HTTP: 'yes',
        WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8,localhost',
        WEBHOOK_RETRY_SCHEDULE_MS: '15000,,300000',
        WEBHOOK_TIMEOUT_MS: '0',
      }),
    ).toThrow(
      /WEBHOOK_ALLOW_HTTP[\s\S]*WEBHOOK_ALLOW_CIDRS: "localhost" is not a CIDR[\s\S]*WEBHOOK_RETRY_SCHEDULE_MS[\s\S]*WEBHOOK_TIMEOUT_MS/,
    );
  });
});
