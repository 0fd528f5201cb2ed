import { z } from 'zod';
import { publicUsage } from '../api';
import { PIPELINES } from '../limits';
import { httpUrl } from '../webhook-targets';
import { endpoint } from './endpoint';

export const PLANS = ['free', 'pro'] as const;
export type Plan = (typeof PLANS)[number];

/** What the gateway needs to know about the caller's account on every request. */
export const accountLimits = z.object({
  accountId: z.string(),
  plan: z.enum(PLANS),
  maxUploadBytes: z.number().int().positive(),
  rateLimitPerMinute: z.number().int().positive(),
});
export type AccountLimits = z.infer<typeof accountLimits>;

/**
 * Where an account's 30-day billing cycles are counted from (docs/decisions.md#plans-credits-and-usage): an ISO-8601
 * instant with `Z` or an offset (e.g. `2025-01-15T00:00:00Z`), stored in UTC. That it is not in
 * the future is checked by billing (VALIDATION_ERROR), whose clock periods are computed with.
 */
export const billingCycleAnchorInput = z.iso.datetime({ offset: true });

/** Longest grace period a rotated-out webhook secret may keep signing deliveries: 7 days. */
export const MAX_WEBHOOK_SECRET_GRACE_SECONDS = 7 * 24 * 60 * 60;

const accountView = accountLimits.extend({
  webhookUrl: z.string().nullable(),
  /** `whsec_…`; only the webhook service and the admin API read it. */
  webhookSecret: z.string(),
  /**
   * The secret the last rotation replaced, while its grace period lasts: until `validUntil`
   * every delivery is signed with both. Null otherwise (and when billing predates rotation).
   */
  previousWebhookSecret: z
    .object({ secret: z.string(), validUntil: z.iso.datetime() })
    .nullable()
    .default(null),
  billingCycleAnchor: z.iso.datetime().nullable(),
  createdAt: z.iso.datetime(),
  /** Credits left now: the period's allowance (after any rollover due) and granted credits. */
  credits: z.object({
    allowanceRemaining: z.number().int(),
    grantedRemaining: z.number().int(),
    available: z.number().int(),
  }),
});

const keyView = z.object({
  keyId: z.string(),
  accountId: z.string(),
  /** The first characters of the key, for people to tell keys apart. Never the key. */
  displayPrefix: z.string(),
  createdAt: z.iso.datetime(),
  revokedAt: z.iso.datetime().nullable(),
  /** When the key last authenticated a request, to the minute (null: never). */
  lastUsedAt: z.iso.datetime().nullable().default(null),
});

/** The dashboard's usage page: the period's completed jobs by pipeline and by day. */
export const usageReport = z.object({
  period: z.object({ start: z.iso.datetime(), end: z.iso.datetime() }),
  pipelines: z.array(
    z.object({
      pipeline: z.enum(PIPELINES),
      jobs: z.number().int().nonnegative(),
      inputBytes: z.number().nonnegative(),
      audioSeconds: z.number().nonnegative(),
      megapixels: z.number().nonnegative(),
      characters: z.number().nonnegative(),
      credits: z.number().int().nonnegative(),
    }),
  ),
  /** One entry per UTC day of the period up to today, oldest first, days without jobs included. */
  days: z.array(
    z.object({
      day: z.iso.date(),
      jobs: z.number().int().nonnegative(),
      credits: z.number().int().nonnegative(),
    }),
  ),
});
export type UsageReport = z.infer<typeof usageReport>;

export const billingEndpoints = {
  /** Verifies a full `sk_live_…` key against its SHA-256 hash; unknown or revoked → UNAUTHORIZED. */
  authenticate: endpoint(
    'billing',
    'authenticate',
    z.object({ apiKey: z.string() }),
    accountLimits.extend({ keyId: z.string() }),
  ),
  getAccount: endpoint('billing', 'get-account', z.object({ accountId: z.string() }), accountView),
  /**
   * Reserves a job's credits exactly once per job id (allowance first, then granted credits);
   * INSUFFICIENT_CREDITS when short, and then nothing is taken.
   */
  reserveCredits: endpoint(
    'billing',
    'reserve-credits',
    z.object({
      accountId: z.string(),
      jobId: z.string(),
      pipeline: z.enum(PIPELINES),
      credits: z.number().int().positive(),
    }),
    z.object({ reserved: z.number().int(), replayed: z.boolean() }),
  ),
  /** Gives a job's reservation back exactly once; a second call is a no-op. */
  refundCredits: endpoint(
    'billing',
    'refund-credits',
    z.object({ accountId: z.string(), jobId: z.string() }),
    z.object({ refunded: z.number().int(), replayed: z.boolean() }),
  ),
  getUsage: endpoint('billing', 'get-usage', z.object({ accountId: z.string() }), publicUsage),

  // Admin operations, reached through the admin API only.
  createAccount: endpoint(
    'billing',
    'create-account',
    z.object({
      plan: z.enum(PLANS).default('free'),
      credits: z.number().int().nonnegative().optional(),
      webhookUrl: httpUrl.nullable().optional(),
      /** Unset: calendar-month periods. */
      billingCycleAnchor: billingCycleAnchorInput.optional(),
    }),
    z.object({ accountId: z.string(), apiKey: z.string(), webhookSecret: z.string() }),
  ),
  /** `billingCycleAnchor: null` goes back to calendar-month periods. */
  updateAccount: endpoint(
    'billing',
    'update-account',
    z.object({
      accountId: z.string(),
      plan: z.enum(PLANS).optional(),
      webhookUrl: httpUrl.nullable().optional(),
      billingCycleAnchor: billingCycleAnchorInput.nullable().optional(),
    }),
    accountView,
  ),
  /**
   * Replaces the account's webhook secret with a new one (sealed at rest like the first). The
   * replaced secret keeps signing, next to the new one, for `gracePeriodSeconds` (default:
   * billing's `WEBHOOK_SECRET_GRACE_MS`, 24 h); a secret replaced earlier stops at once.
   * 0 retires it immediately (a leaked secret). Unknown account → NOT_FOUND.
   */
  rotateWebhookSecret: endpoint(
    'billing',
    'rotate-webhook-secret',
    z.object({
      accountId: z.string(),
      gracePeriodSeconds: z.number().int().min(0).max(MAX_WEBHOOK_SECRET_GRACE_SECONDS).optional(),
    }),
    z.object({ webhookSecret: z.string(), previousValidUntil: z.iso.datetime() }),
  ),
  addCredits: endpoint(
    'billing',
    'add-credits',
    z.object({ accountId: z.string(), credits: z.number().int().positive() }),
    z.object({ accountId: z.string(), grantedCredits: z.number().int() }),
  ),
  createKey: endpoint(
    'billing',
    'create-key',
    z.object({ accountId: z.string() }),
    z.object({ keyId: z.string(), apiKey: z.string() }),
  ),
  /**
   * Idempotent. With `accountId` (the dashboard), a key of another account is NOT_FOUND and left
   * alone; without it (operators), any key.
   */
  revokeKey: endpoint(
    'billing',
    'revoke-key',
    z.object({ keyId: z.string(), accountId: z.string().optional() }),
    keyView,
  ),
  listKeys: endpoint(
    'billing',
    'list-keys',
    z.object({ accountId: z.string() }),
    z.object({ keys: z.array(keyView) }),
  ),

  // Dashboard sessions (docs/decisions.md#the-dashboard): a session token is a bearer secret
  // held only in an HttpOnly cookie; billing stores its SHA-256, never the token.

  /** Mints a one-time sign-in link token for an account (admin API and CLI). */
  createSignInLink: endpoint(
    'billing',
    'create-sign-in-link',
    z.object({ accountId: z.string() }),
    z.object({ token: z.string(), expiresAt: z.iso.datetime() }),
  ),
  /**
   * Starts a dashboard session from a sign-in link (usable once, before it expires) or from an
   * API key (verified like any request's; the key is not kept). UNAUTHORIZED otherwise.
   */
  startSession: endpoint(
    'billing',
    'start-session',
    z.discriminatedUnion('method', [
      z.object({ method: z.literal('sign-in-link'), token: z.string().max(256) }),
      z.object({ method: z.literal('api-key'), apiKey: z.string().max(256) }),
    ]),
    z.object({ sessionToken: z.string(), accountId: z.string(), expiresAt: z.iso.datetime() }),
  ),
  /** The session's account; UNAUTHORIZED when unknown, expired, ended or revoked. */
  authenticateSession: endpoint(
    'billing',
    'authenticate-session',
    z.object({ sessionToken: z.string().max(256) }),
    z.object({ sessionId: z.string(), accountId: z.string(), expiresAt: z.iso.datetime() }),
  ),
  /** Sign-out: the session is refused from now on. Idempotent. */
  endSession: endpoint(
    'billing',
    'end-session',
    z.object({ sessionToken: z.string().max(256) }),
    z.object({ ended: z.boolean() }),
  ),
  /** Ends every session of the account (a customer's "sign out everywhere", or an operator's). */
  revokeSessions: endpoint(
    'billing',
    'revoke-sessions',
    z.object({ accountId: z.string() }),
    z.object({ revoked: z.number().int().nonnegative() }),
  ),
  /**
   * The current period's completed jobs per pipeline with the credits they cost, and per day
   * (UTC) for the dashboard's chart.
   */
  getUsageReport: endpoint(
    'billing',
    'get-usage-report',
    z.object({ accountId: z.string() }),
    usageReport,
  ),
};
