import type { IndexSpecification } from '@tamp/kit';
import type { Pipeline, Plan } from '@tamp/proto';
import type { CreditMovement } from '../domain/credit-movement';
import type { RetiredWebhookSecret } from '../domain/webhook-secret';

export const COLLECTIONS = {
  accounts: 'accounts',
  apiKeys: 'api_keys',
  ledger: 'ledger',
  usage: 'usage',
  signInLinks: 'sign_in_links',
  dashboardSessions: 'dashboard_sessions',
} as const;

/** A posting applied to an account's balances whose ledger entry may not record it yet. */
export interface PostingMarker extends CreditMovement {
  periodStart: Date;
}

export interface AccountDocument {
  _id: string;
  plan: Plan;
  webhookUrl: string | null;
  /** `whsec_…`, sealed when an encryption key is configured. */
  webhookSecret: string;
  /**
   * The secret the last rotation replaced (sealed the same way) and the end of its grace period.
   * Absent on accounts never rotated; cleared once read after it expired.
   */
  previousWebhookSecret?: RetiredWebhookSecret | null;
  billingCycleAnchor: Date | null;
  createdAt: Date;
  /** Start of the period `allowanceRemaining` belongs to; moving it is the rollover. */
  periodStart: Date;
  allowanceRemaining: number;
  grantedRemaining: number;
  /** Bumped by every update of the account, so a read can be used as an optimistic guard. */
  version: number;
  /** Keyed by `<kind>_<id>`, see application/credit-postings.ts. */
  postings: Record<string, PostingMarker>;
  /**
   * Jobs whose reservation was released before it was applied (an abandoned creation), keyed by
   * job id: a reservation for one of them is refused. Absent until the first release.
   */
  releasedReservations?: Record<string, Date>;
}

export interface ApiKeyDocument {
  _id: string;
  /** SHA-256 (hex) of the full key; the key itself is never stored. */
  hash: string;
  accountId: string;
  displayPrefix: string;
  createdAt: Date;
  revokedAt: Date | null;
  /** Start of the minute the key last authenticated a request; absent until then. */
  lastUsedAt?: Date | null;
}

export type LedgerKind = 'reserve' | 'refund' | 'grant' | 'period';

export interface LedgerEntry {
  /** Deterministic: `reserve:<jobId>`, `refund:<jobId>`, `grant:<uuid>`, `period:<acct>:<start>`. */
  _id: string;
  kind: LedgerKind;
  accountId: string;
  jobId: string | null;
  /** Credits asked for (reserve, grant) or the period allowance set (period). */
  credits: number;
  /** `pending` until the movement below is known to be applied to the account. */
  state: 'pending' | 'applied';
  /** Signed changes of the two buckets, set when applied. */
  allowance: number | null;
  granted: number | null;
  periodStart: Date | null;
  createdAt: Date;
  appliedAt: Date | null;
}

export interface UsageDocument {
  /** The job id: one usage record per completed job, however often the event arrives. */
  _id: string;
  accountId: string;
  pipeline: Pipeline;
  inputBytes: number;
  audioSeconds: number;
  megapixels: number;
  characters: number;
  completedAt: Date;
  /**
   * What the job cost (proto's creditCost at record time) and its UTC day (`YYYY-MM-DD`), for
   * the usage report's sums. Absent on records written before: the report prices those itself.
   */
  credits?: number;
  completedDay?: string;
}

export const BILLING_INDEXES: IndexSpecification[] = [
  { collection: COLLECTIONS.apiKeys, name: 'hash_unique', keys: { hash: 1 }, unique: true },
  { collection: COLLECTIONS.apiKeys, name: 'account', keys: { accountId: 1, createdAt: 1 } },
  { collection: COLLECTIONS.ledger, name: 'account', keys: { accountId: 1, createdAt: 1 } },
  { collection: COLLECTIONS.usage, name: 'account_period', keys: { accountId: 1, completedAt: 1 } },
  // Sign-out everywhere, and each account's spent links and expired sessions deleted when it
  // signs in again; sign-in links and sessions are otherwise read by `_id` (the hash) only.
  { collection: COLLECTIONS.dashboardSessions, name: 'account', keys: { accountId: 1 } },
  { collection: COLLECTIONS.signInLinks, name: 'account', keys: { accountId: 1 } },
];
