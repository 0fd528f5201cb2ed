import type { Logger } from '@tamp/kit';
import { ServiceError } from '@tamp/proto';
import type { AccountRepository } from '../adapters/account-repository';
import type { DashboardSessionDocument, SessionRepository } from '../adapters/session-repository';
import type { SignInLinkRepository } from '../adapters/sign-in-link-repository';
import { isWellFormedToken, newSessionId, newToken, tokenHash } from '../domain/session-token';
import type { ApiKeys } from './api-keys';

export interface DashboardSessionSettings {
  /** How long a session lasts from sign-in (`DASHBOARD_SESSION_TTL_MS`). */
  sessionTtlMs: number;
  /** How long a sign-in link can be redeemed (`SIGN_IN_LINK_TTL_MS`). */
  signInLinkTtlMs: number;
}

export type SessionStart =
  | { method: 'sign-in-link'; token: string }
  | { method: 'api-key'; apiKey: string };

const INVALID_LINK = 'The sign-in link is invalid, used or expired';
const INVALID_SESSION = 'The session is invalid, expired or ended';

/**
 * The customer dashboard's sign-in: one-time links and API keys start sessions, whose bearer
 * tokens the gateway keeps in a cookie. Only SHA-256 hashes of links and sessions are stored and
 * looked up, so a database leak hands out neither, and no secret is compared here. Tokens are
 * never logged; session ids are.
 */
export class DashboardSessions {
  constructor(
    private readonly links: SignInLinkRepository,
    private readonly sessions: SessionRepository,
    private readonly accounts: AccountRepository,
    private readonly keys: ApiKeys,
    private readonly settings: DashboardSessionSettings,
    private readonly now: () => Date,
    private readonly logger: Logger,
  ) {}

  /** Unknown account → NOT_FOUND. */
  async createSignInLink(accountId: string): Promise<{ token: string; expiresAt: string }> {
    await this.accounts.get(accountId);
    const token = newToken('signInLink');
    const createdAt = this.now();
    const expiresAt = new Date(createdAt.getTime() + this.settings.signInLinkTtlMs);
    await this.links.mint({ _id: tokenHash(token), accountId, createdAt, expiresAt, usedAt: null });
    this.logger.info({ accountId, expiresAt }, 'sign-in link created');
    await this.housekeep(accountId, 'sign-in links', () =>
      this.links.deleteSpentOf(accountId, createdAt),
    );
    return { token, expiresAt: expiresAt.toISOString() };
  }

  async start(
    request: SessionStart,
  ): Promise<{ sessionToken: string; accountId: string; expiresAt: string }> {
    const accountId =
      request.method === 'sign-in-link'
        ? await this.redeemLink(request.token)
        : (await this.keys.authenticate(request.apiKey)).accountId;
    const sessionToken = newToken('session');
    const createdAt = this.now();
    const session: DashboardSessionDocument = {
      _id: tokenHash(sessionToken),
      sessionId: newSessionId(),
      accountId,
      createdAt,
      expiresAt: new Date(createdAt.getTime() + this.settings.sessionTtlMs),
      endedAt: null,
    };
    await this.sessions.open(session);
    this.logger.info(
      { accountId, sessionId: session.sessionId, method: request.method },
      'dashboard session started',
    );
    await this.housekeep(accountId, 'sessions', () =>
      this.sessions.deleteExpiredOf(accountId, createdAt),
    );
    return { sessionToken, accountId, expiresAt: session.expiresAt.toISOString() };
  }

  /** UNAUTHORIZED when unknown, ended (signed out or revoked), expired, or its account is gone. */
  async authenticate(
    sessionToken: string,
  ): Promise<{ sessionId: string; accountId: string; expiresAt: string }> {
    const session = isWellFormedToken('session', sessionToken)
      ? await this.sessions.find(tokenHash(sessionToken))
      : null;
    if (session === null || !isActive(session, this.now())) {
      throw new ServiceError('UNAUTHORIZED', INVALID_SESSION);
    }
    await this.accountOrRefuse(session.accountId, INVALID_SESSION);
    return {
      sessionId: session.sessionId,
      accountId: session.accountId,
      expiresAt: session.expiresAt.toISOString(),
    };
  }

  /** Sign-out. Idempotent: ending an ended session answers `ended: true` again. */
  async end(sessionToken: string): Promise<{ ended: boolean }> {
    if (!isWellFormedToken('session', sessionToken)) return { ended: false };
    return { ended: await this.sessions.end(tokenHash(sessionToken), this.now()) };
  }

  /** Sign-out everywhere. Unknown account → NOT_FOUND. */
  async revokeAll(accountId: string): Promise<{ revoked: number }> {
    await this.accounts.get(accountId);
    const revoked = await this.sessions.endAllOf(accountId, this.now());
    this.logger.info({ accountId, revoked }, 'dashboard sessions revoked');
    return { revoked };
  }

  private async redeemLink(token: string): Promise<string> {
    const accountId = isWellFormedToken('signInLink', token)
      ? await this.links.redeem(tokenHash(token), this.now())
      : null;
    if (accountId === null) throw new ServiceError('UNAUTHORIZED', INVALID_LINK);
    await this.accountOrRefuse(accountId, INVALID_LINK);
    return accountId;
  }

  /**
   * Deletes what the account can no longer use, each time it mints a link or starts a session:
   * what an account keeps is bounded by its own recent sign-ins, with no sweeper scanning the
   * collections (range filters are not served from FerretDB's indexes). A failure here is a
   * warning, never a refused sign-in: the next one deletes the same.
   */
  private async housekeep(
    accountId: string,
    what: string,
    deleteSpent: () => Promise<number>,
  ): Promise<void> {
    try {
      const deleted = await deleteSpent();
      if (deleted > 0) this.logger.debug({ accountId, deleted }, `spent ${what} deleted`);
    } catch (error) {
      this.logger.warn({ err: error, accountId }, `spent ${what} not deleted`);
    }
  }

  /** An account that is gone signs nobody in: UNAUTHORIZED rather than NOT_FOUND. */
  private async accountOrRefuse(accountId: string, message: string): Promise<void> {
    if ((await this.accounts.find(accountId)) === null) {
      throw new ServiceError('UNAUTHORIZED', message);
    }
  }
}

/** Until it is ended, and before its expiry instant (excluded). */
function isActive(session: DashboardSessionDocument, now: Date): boolean {
  return session.endedAt === null && now.getTime() < session.expiresAt.getTime();
}
