import type { EndpointResponse, Logger, NatsConnection, Rpc } from '@tamp/kit';
import { accountNotification, billingEndpoints, ServiceError, type Topology } from '@tamp/proto';
import { LRUCache } from 'lru-cache';

/** An account as billing answers it: its default webhook URL and its signing secrets. */
export type WebhookAccount = EndpointResponse<typeof billingEndpoints.getAccount>;

/** What a job event without a URL of its own is delivered to: the account's default, or none. */
export type DefaultTarget = { found: false } | { found: true; webhookUrl: string | null };

/** Accounts whose default URL is remembered (evicted on billing's notification). */
const REMEMBERED_ACCOUNTS = 10_000;
/** The longest a default URL is remembered: the bound when a notification is missed. */
const DEFAULT_TARGET_TTL_MS = 60_000;

/**
 * The accounts, read from billing. `find` reads on every use (delivery attempts sign with the
 * secrets as they are now: they rotate, and a rotation with no grace retires a leaked secret at
 * once). `defaultTarget` remembers the default URL per account, so a job event of an account
 * without one costs no request: billing publishes `notify.account.<id>` after every change of
 * an account's settings, which evicts it here, and an entry lives at most a minute in case a
 * notification is missed (core NATS, at most once).
 */
export class BillingAccounts {
  private readonly defaultTargets = new LRUCache<string, DefaultTarget>({
    max: REMEMBERED_ACCOUNTS,
    ttl: DEFAULT_TARGET_TTL_MS,
  });
  private subscription: { unsubscribe(): void } | undefined;

  constructor(
    private readonly rpc: Rpc,
    private readonly nats: NatsConnection,
    private readonly topology: Topology,
    private readonly logger: Logger,
  ) {}

  /** Subscribes to billing's account notifications; before the first `defaultTarget`. */
  async start(): Promise<void> {
    const prefix = this.topology.subjects.accountNotification('');
    this.subscription = this.nats.subscribe(this.topology.subjects.allAccountNotifications, {
      callback: (error, message) => {
        if (error !== null) {
          this.logger.warn({ err: error }, 'account notification subscription error');
          // Whatever was missed meanwhile: forget everything rather than serve it.
          this.defaultTargets.clear();
          return;
        }
        const parsed = accountNotification.safeParse(safeJson(message.json.bind(message)));
        this.defaultTargets.delete(
          parsed.success ? parsed.data.accountId : message.subject.slice(prefix.length),
        );
      },
    });
    await this.nats.flush();
  }

  stop(): void {
    this.subscription?.unsubscribe();
  }

  /** Null when billing says the account no longer exists; throws when billing is unavailable. */
  async find(accountId: string): Promise<WebhookAccount | null> {
    try {
      return await this.rpc.call(billingEndpoints.getAccount, { accountId });
    } catch (error) {
      if (error instanceof ServiceError && error.code === 'NOT_FOUND') return null;
      throw error;
    }
  }

  /** Throws when billing is unavailable (nothing is remembered then). */
  async defaultTarget(accountId: string): Promise<DefaultTarget> {
    const known = this.defaultTargets.get(accountId);
    if (known !== undefined) return known;
    const account = await this.find(accountId);
    const target: DefaultTarget =
      account === null ? { found: false } : { found: true, webhookUrl: account.webhookUrl };
    this.defaultTargets.set(accountId, target);
    return target;
  }
}

function safeJson(read: () => unknown): unknown {
  try {
    return read();
  } catch {
    return null;
  }
}
