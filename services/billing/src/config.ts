import { mongoEnv, natsEnv, serviceEnv } from '@tamp/kit';
import { MAX_WEBHOOK_SECRET_GRACE_SECONDS } from '@tamp/proto';
import { z } from 'zod';
import { type PlanCatalog, planCatalog, planOverrides } from './domain/plans';

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

/**
 * `PLANS_JSON`, e.g. `{"free":{"creditsPerPeriod":500}}`: merged over the default plans (upload
 * size, credits per period, requests per minute).
 */
const plansJson = z
  .string()
  .optional()
  .transform((text, context): PlanCatalog => {
    if (text === undefined || text.trim() === '') return planCatalog();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      context.addIssue({ code: 'custom', message: 'must be JSON' });
      return z.NEVER;
    }
    const overrides = planOverrides.safeParse(parsed);
    if (!overrides.success) {
      for (const issue of overrides.error.issues) {
        context.addIssue({ code: 'custom', message: `${issue.path.join('.')}: ${issue.message}` });
      }
      return z.NEVER;
    }
    return planCatalog(overrides.data);
  });

/** Optional AES-256 key (base64 of 32 bytes) sealing webhook secrets at rest (AES-256-GCM). */
const encryptionKey = z
  .string()
  .optional()
  .transform((text, context): Buffer | null => {
    if (text === undefined || text === '') return null;
    const key = Buffer.from(text, 'base64');
    if (key.length !== 32) {
      context.addIssue({ code: 'custom', message: 'must be base64 of exactly 32 bytes' });
      return z.NEVER;
    }
    return key;
  });

export const configSchema = z.object({
  ...serviceEnv,
  ...natsEnv,
  ...mongoEnv,
  PLANS_JSON: plansJson,
  SECRETS_ENCRYPTION_KEY: encryptionKey,
  /**
   * How long a rotated-out webhook secret keeps signing deliveries next to the new one (24 h),
   * unless the rotation names its own period; at most 7 days.
   */
  WEBHOOK_SECRET_GRACE_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(MAX_WEBHOOK_SECRET_GRACE_SECONDS * 1000)
    // Receivers get a day to move to the new secret.
    .default(DAY_MS),
  /**
   * How long a dashboard session lasts from sign-in (12 h): a working day without signing in
   * again, short enough that a forgotten browser does not stay signed in. 1 minute to 7 days.
   */
  DASHBOARD_SESSION_TTL_MS: z.coerce
    .number()
    .int()
    .min(MINUTE_MS)
    .max(7 * DAY_MS)
    .default(12 * HOUR_MS),
  /**
   * How long a sign-in link can be redeemed (15 min): long enough to open an e-mail, short enough
   * that an old one found later is useless. 1 minute to 24 h.
   */
  SIGN_IN_LINK_TTL_MS: z.coerce
    .number()
    .int()
    .min(MINUTE_MS)
    .max(DAY_MS)
    .default(15 * MINUTE_MS),
});
export type Config = z.output<typeof configSchema>;

export interface BillingSettings {
  plans: PlanCatalog;
  /** Seals webhook secrets at rest (AES-256-GCM); null stores them plain. */
  secretsEncryptionKey: Buffer | null;
  /** How long a rotated-out webhook secret keeps signing when the rotation names no period. */
  webhookSecretGraceMs: number;
  /** How long a dashboard session lasts from sign-in. */
  dashboardSessionTtlMs: number;
  /** How long a sign-in link can be redeemed. */
  signInLinkTtlMs: number;
}

export function billingSettingsFrom(config: Config): BillingSettings {
  return {
    plans: config.PLANS_JSON,
    secretsEncryptionKey: config.SECRETS_ENCRYPTION_KEY,
    webhookSecretGraceMs: config.WEBHOOK_SECRET_GRACE_MS,
    dashboardSessionTtlMs: config.DASHBOARD_SESSION_TTL_MS,
    signInLinkTtlMs: config.SIGN_IN_LINK_TTL_MS,
  };
}
