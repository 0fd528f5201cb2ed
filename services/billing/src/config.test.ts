import { MB } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { configSchema } from './config';

const base = { NATS_URL: 'nats://127.0.0.1:4222', MONGO_URL: 'mongodb://127.0.0.1:27017' };

describe('billing configuration', () => {
  it('uses the decided plans by default', () => {
    const config = configSchema.parse(base);
    expect(config.PLANS_JSON).toEqual({
      free: { maxUploadBytes: 25 * MB, creditsPerPeriod: 100, rateLimitPerMinute: 60 },
      pro: { maxUploadBytes: 100 * MB, creditsPerPeriod: 10_000, rateLimitPerMinute: 600 },
    });
    expect(config.SECRETS_ENCRYPTION_KEY).toBeNull();
    expect(config.WEBHOOK_SECRET_GRACE_MS).toBe(24 * 60 * 60 * 1000);
  });

  it('takes a webhook secret grace period from 0 to 7 days', () => {
    expect(
      configSchema.parse({ ...base, WEBHOOK_SECRET_GRACE_MS: '0' }).WEBHOOK_SECRET_GRACE_MS,
    ).toBe(0);
    const week = 7 * 24 * 60 * 60 * 1000;
    expect(
      configSchema.parse({ ...base, WEBHOOK_SECRET_GRACE_MS: String(week) })
        .WEBHOOK_SECRET_GRACE_MS,
    ).toBe(week);
    for (const WEBHOOK_SECRET_GRACE_MS of ['-1', String(week + 1), '1.5', 'a day']) {
      expect(configSchema.safeParse({ ...base, WEBHOOK_SECRET_GRACE_MS }).success).toBe(false);
    }
  });

  it('lasts a dashboard session 12 h (1 min to 7 days) and a sign-in link 15 min (1 min to 24 h)', () => {
    const minute = 60_000;
    const defaults = configSchema.parse(base);
    expect(defaults.DASHBOARD_SESSION_TTL_MS).toBe(12 * 60 * minute);
    expect(defaults.SIGN_IN_LINK_TTL_MS).toBe(15 * minute);
    const set = configSchema.parse({
      ...base,
      DASHBOARD_SESSION_TTL_MS: String(7 * 24 * 60 * minute),
      SIGN_IN_LINK_TTL_MS: String(minute),
    });
    expect(set.DASHBOARD_SESSION_TTL_MS).toBe(7 * 24 * 60 * minute);
    expect(set.SIGN_IN_LINK_TTL_MS).toBe(minute);
    for (const DASHBOARD_SESSION_TTL_MS of [String(minute - 1), String(7 * 24 * 60 * minute + 1)]) {
      expect(configSchema.safeParse({ ...base, DASHBOARD_SESSION_TTL_MS }).success).toBe(false);
    }
    for (const SIGN_IN_LINK_TTL_MS of ['0', String(24 * 60 * minute + 1), 'soon']) {
      expect(configSchema.safeParse({ ...base, SIGN_IN_LINK_TTL_MS }).success).toBe(false);
    }
  });

  it('merges PLANS_JSON over the defaults', () => {
    const config = configSchema.parse({
      ...base,
      PLANS_JSON: JSON.stringify({ free: { creditsPerPeriod: 500 } }),
    });
    expect(config.PLANS_JSON.free).toEqual({
      maxUploadBytes: 25 * MB,
      creditsPerPeriod: 500,
      rateLimitPerMinute: 60,
    });
    expect(config.PLANS_JSON.pro.creditsPerPeriod).toBe(10_000);
  });

  it('rejects bad PLANS_JSON and bad encryption keys', () => {
    for (const PLANS_JSON of ['{', '{"gold":{}}', '{"free":{"maxUploadBytes":-1}}']) {
      expect(configSchema.safeParse({ ...base, PLANS_JSON }).success).toBe(false);
    }
    const short = Buffer.alloc(16).toString('base64');
    expect(configSchema.safeParse({ ...base, SECRETS_ENCRYPTION_KEY: short }).success).toBe(false);
    const key = Buffer.alloc(32, 7).toString('base64');
    expect(
      configSchema.parse({ ...base, SECRETS_ENCRYPTION_KEY: key }).SECRETS_ENCRYPTION_KEY,
    ).toEqual(Buffer.alloc(32, 7));
  });
});
