import { createHash } from 'node:crypto';
import {
  billingEndpoints,
  creditCost,
  type JobEvent,
  KB,
  MB,
  newId,
  type Pipeline,
  type ServiceError,
} from '@tamp/proto';
import type { CommandStartedEvent } from 'mongodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { UsageDocument } from '../src/adapters/documents';
import { BillingHarness, failure, SESSION_TTL_MS, SIGN_IN_LINK_TTL_MS } from './harness';

const MINUTE_MS = 60_000;
/** Half a minute in, so that "to the minute" shows. */
const JANUARY = new Date('2025-01-15T12:00:30Z');
const harness = new BillingHarness(JANUARY);
const { call } = harness;
/** Every `lastUsedAt` write billing sends: the key and the minute written. */
const keyUseWrites: { keyId: string; minute: string }[] = [];

beforeAll(async () => {
  await harness.start({ onCommandStarted: recordKeyUseWrite });
});

afterAll(() => harness.stop());

afterEach(() => {
  harness.resetClock();
});

interface KeyUseSet {
  lastUsedAt?: unknown;
}

function recordKeyUseWrite(event: CommandStartedEvent): void {
  if (event.commandName !== 'update' || event.command.update !== 'api_keys') return;
  const updates = event.command.updates as { q: { _id: string }; u: { $set?: KeyUseSet } }[];
  for (const update of updates) {
    const minute = update.u.$set?.lastUsedAt;
    if (minute instanceof Date)
      keyUseWrites.push({ keyId: update.q._id, minute: minute.toISOString() });
  }
}

const signInLink = (accountId: string) => call(billingEndpoints.createSignInLink, { accountId });

const redeem = (token: string) =>
  call(billingEndpoints.startSession, { method: 'sign-in-link', token });

const authenticateSession = (sessionToken: string) =>
  call(billingEndpoints.authenticateSession, { sessionToken });

async function sessionOf(accountId: string): Promise<string> {
  return (await redeem((await signInLink(accountId)).token)).sessionToken;
}

const INVALID_LINK = 'The sign-in link is invalid, used or expired';

describe('sign-in links', () => {
  it('are tsl_ tokens valid for SIGN_IN_LINK_TTL_MS, minted for existing accounts only', async () => {
    const { accountId } = await harness.createAccount();
    expect(await signInLink(accountId)).toEqual({
      token: expect.stringMatching(/^tsl_[0-9A-Za-z]{43}$/),
      expiresAt: new Date(JANUARY.getTime() + SIGN_IN_LINK_TTL_MS).toISOString(),
    });
    for (const unknown of [newId('account'), 'acct_nope', '']) {
      expect((await failure(signInLink(unknown))).code).toBe('NOT_FOUND');
    }
  });

  it('start one session: a second redemption is UNAUTHORIZED', async () => {
    const { accountId } = await harness.createAccount();
    const { token } = await signInLink(accountId);
    const started = await redeem(token);
    expect(started).toEqual({
      sessionToken: expect.stringMatching(/^tss_[0-9A-Za-z]{43}$/),
      accountId,
      expiresAt: new Date(JANUARY.getTime() + SESSION_TTL_MS).toISOString(),
    });
    expect(await authenticateSession(started.sessionToken)).toEqual({
      sessionId: expect.stringMatching(/^ses_[0-9a-f]{16}$/),
      accountId,
      expiresAt: started.expiresAt,
    });
    const again = await failure(redeem(token));
    expect(again.code).toBe('UNAUTHORIZED');
    expect(again.message).toBe(INVALID_LINK);
  });

  it('start exactly one session when redeemed concurrently', async () => {
    const { accountId } = await harness.createAccount();
    const { token } = await signInLink(accountId);
    const outcomes = await Promise.allSettled(Array.from({ length: 8 }, () => redeem(token)));
    const started = outcomes.filter((outcome) => outcome.status === 'fulfilled');
    const codes = outcomes.flatMap((outcome) =>
      outcome.status === 'rejected' ? [(outcome.reason as ServiceError).code] : [],
    );
    expect(started).toHaveLength(1);
    expect(codes).toEqual(Array(7).fill('UNAUTHORIZED'));
    expect(await harness.db.collection('dashboard_sessions').countDocuments({ accountId })).toBe(1);
  });

  it('are refused from their expiry on, and when unknown or malformed', async () => {
    const { accountId } = await harness.createAccount();
    const { token } = await signInLink(accountId);
    harness.moveClockTo(SIGN_IN_LINK_TTL_MS);
    expect((await failure(redeem(token))).code).toBe('UNAUTHORIZED');
    // Refused for its expiry alone: a moment earlier the same link still works.
    harness.moveClockTo(SIGN_IN_LINK_TTL_MS - 1);
    expect((await redeem(token)).accountId).toBe(accountId);

    const sessionToken = await sessionOf(accountId);
    for (const unknown of [`tsl_${'A'.repeat(43)}`, sessionToken, 'tsl_short', '', `${token}x`]) {
      const error = await failure(redeem(unknown));
      expect(error.code).toBe('UNAUTHORIZED');
      expect(error.message).toBe(INVALID_LINK);
    }
  });
});

describe('dashboard sessions', () => {
  it('authenticate until they expire', async () => {
    const { accountId } = await harness.createAccount();
    const sessionToken = await sessionOf(accountId);
    harness.moveClockTo(SESSION_TTL_MS - 1);
    expect((await authenticateSession(sessionToken)).accountId).toBe(accountId);
    harness.moveClockTo(SESSION_TTL_MS);
    expect((await failure(authenticateSession(sessionToken))).code).toBe('UNAUTHORIZED');
  });

  it('end at sign-out, idempotently; unknown sessions are not ended', async () => {
    const { accountId } = await harness.createAccount();
    const [signedOut, other] = [await sessionOf(accountId), await sessionOf(accountId)];
    expect(await call(billingEndpoints.endSession, { sessionToken: signedOut })).toEqual({
      ended: true,
    });
    expect((await failure(authenticateSession(signedOut))).code).toBe('UNAUTHORIZED');
    expect((await authenticateSession(other)).accountId).toBe(accountId);

    harness.moveClockTo(MINUTE_MS);
    expect(await call(billingEndpoints.endSession, { sessionToken: signedOut })).toEqual({
      ended: true,
    });
    const stored = await harness.db
      .collection('dashboard_sessions')
      .findOne({ _id: sha256(signedOut) as never });
    expect(stored?.endedAt).toEqual(JANUARY);

    for (const sessionToken of [`tss_${'A'.repeat(43)}`, 'tss_short', '']) {
      expect(await call(billingEndpoints.endSession, { sessionToken })).toEqual({ ended: false });
    }
  });

  it('are all ended by revokeSessions, and only those of the account', async () => {
    const { accountId } = await harness.createAccount();
    const neighbour = await harness.createAccount();
    const sessions = [await sessionOf(accountId), await sessionOf(accountId)];
    const signedOut = await sessionOf(accountId);
    await call(billingEndpoints.endSession, { sessionToken: signedOut });
    const neighbours = await sessionOf(neighbour.accountId);

    expect(await call(billingEndpoints.revokeSessions, { accountId })).toEqual({ revoked: 2 });
    for (const sessionToken of [...sessions, signedOut]) {
      expect((await failure(authenticateSession(sessionToken))).code).toBe('UNAUTHORIZED');
    }
    expect((await authenticateSession(neighbours)).accountId).toBe(neighbour.accountId);
    expect(await call(billingEndpoints.revokeSessions, { accountId })).toEqual({ revoked: 0 });
    // Sign-in still works afterwards: revocation ends sessions, not the account.
    expect((await authenticateSession(await sessionOf(accountId))).accountId).toBe(accountId);
    const unknown = await failure(
      call(billingEndpoints.revokeSessions, { accountId: newId('account') }),
    );
    expect(unknown.code).toBe('NOT_FOUND');
  });

  it('are refused once their account is gone', async () => {
    const { accountId } = await harness.createAccount();
    const sessionToken = await sessionOf(accountId);
    const { token } = await signInLink(accountId);
    await harness.db.collection('accounts').deleteOne({ _id: accountId as never });
    expect((await failure(authenticateSession(sessionToken))).code).toBe('UNAUTHORIZED');
    expect((await failure(redeem(token))).code).toBe('UNAUTHORIZED');
  });

  it('start from an active API key, which is not kept; revoked and unknown keys are refused', async () => {
    const { accountId, apiKey } = await harness.createAccount();
    const started = await call(billingEndpoints.startSession, { method: 'api-key', apiKey });
    expect(started.accountId).toBe(accountId);
    expect((await authenticateSession(started.sessionToken)).accountId).toBe(accountId);
    const stored = JSON.stringify(
      await harness.db.collection('dashboard_sessions').find({}).toArray(),
    );
    expect(stored).not.toContain(apiKey.slice(8));

    const revoked = await call(billingEndpoints.createKey, { accountId });
    await call(billingEndpoints.revokeKey, { keyId: revoked.keyId });
    for (const refused of [revoked.apiKey, `sk_live_${'A'.repeat(43)}`, 'sk_live_short', '']) {
      const error = await failure(
        call(billingEndpoints.startSession, { method: 'api-key', apiKey: refused }),
      );
      expect(error.code).toBe('UNAUTHORIZED');
    }
  });

  it('are deleted once spent, when the account signs in again; active ones and other accounts stay', async () => {
    const { accountId } = await harness.createAccount();
    const neighbour = await harness.createAccount();
    const storedOf = async (collection: string, owner: string) =>
      (await harness.db.collection(collection).find({ accountId: owner }).toArray()).map(
        (document) => document._id,
      );
    const used = await signInLink(accountId);
    const { sessionToken: expiring } = await redeem(used.token);
    const unused = await signInLink(accountId);
    const neighbourSession = await sessionOf(neighbour.accountId);
    const neighbourLinks = await storedOf('sign_in_links', neighbour.accountId);

    // Past the link's expiry, before the session's: a new link deletes the used and the expired.
    harness.moveClockTo(SIGN_IN_LINK_TTL_MS);
    const fresh = await signInLink(accountId);
    expect(await storedOf('sign_in_links', accountId)).toEqual([sha256(fresh.token)]);
    expect((await failure(redeem(used.token))).message).toBe(INVALID_LINK);
    expect((await failure(redeem(unused.token))).message).toBe(INVALID_LINK);

    // Past the first session's expiry: the next session deletes it and keeps the active one.
    const { sessionToken: active } = await redeem(fresh.token);
    harness.moveClockTo(SESSION_TTL_MS);
    const latest = await call(billingEndpoints.startSession, {
      method: 'api-key',
      apiKey: (await call(billingEndpoints.createKey, { accountId })).apiKey,
    });
    expect((await storedOf('dashboard_sessions', accountId)).sort()).toEqual(
      [sha256(active), sha256(latest.sessionToken)].sort(),
    );
    expect((await failure(authenticateSession(expiring))).code).toBe('UNAUTHORIZED');
    expect((await authenticateSession(active)).accountId).toBe(accountId);
    // The neighbour's expired session and spent link stay until the neighbour signs in again.
    expect(await storedOf('dashboard_sessions', neighbour.accountId)).toEqual([
      sha256(neighbourSession),
    ]);
    expect(await storedOf('sign_in_links', neighbour.accountId)).toEqual(neighbourLinks);
  });

  it('store only the SHA-256 of link and session tokens', async () => {
    const { accountId } = await harness.createAccount();
    const { token } = await signInLink(accountId);
    const { sessionToken } = await redeem(token);
    const links = await harness.db.collection('sign_in_links').find({ accountId }).toArray();
    const sessions = await harness.db
      .collection('dashboard_sessions')
      .find({ accountId })
      .toArray();
    expect(links.map((link) => link._id)).toEqual([sha256(token)]);
    expect(sessions.map((session) => session._id)).toEqual([sha256(sessionToken)]);
    const stored = JSON.stringify([links, sessions]);
    for (const secret of [token, sessionToken]) expect(stored).not.toContain(secret.slice(4));
  });
});

describe('the last use of API keys', () => {
  it('is recorded by authenticate, to the minute, and shown by listKeys and revokeKey', async () => {
    const { accountId, apiKey } = await harness.createAccount();
    const unused = await call(billingEndpoints.createKey, { accountId });
    const listed = async () =>
      (await call(billingEndpoints.listKeys, { accountId })).keys.map((key) => key.lastUsedAt);
    expect(await listed()).toEqual([null, null]);

    await call(billingEndpoints.authenticate, { apiKey });
    await expect.poll(listed).toEqual(['2025-01-15T12:00:00.000Z', null]);
    expect((await call(billingEndpoints.revokeKey, { keyId: unused.keyId })).lastUsedAt).toBeNull();
  });

  it('is written at most once a minute per key', async () => {
    const { apiKey } = await harness.createAccount();
    const { keyId } = await call(billingEndpoints.authenticate, { apiKey });
    const writes = () => keyUseWrites.filter((write) => write.keyId === keyId);
    for (const second of [1, 10, 29]) {
      harness.moveClockTo(second * 1000);
      await call(billingEndpoints.authenticate, { apiKey });
    }
    harness.moveClockTo(40_000);
    await call(billingEndpoints.authenticate, { apiKey });
    await call(billingEndpoints.authenticate, { apiKey });
    await expect.poll(() => writes().length).toBeGreaterThanOrEqual(2);
    expect(writes().map((write) => write.minute)).toEqual([
      '2025-01-15T12:00:00.000Z',
      '2025-01-15T12:01:00.000Z',
    ]);
  });
});

describe('the usage report', () => {
  /** A completed job of `pipeline`, created and completed at `completedAt`. */
  const completed = (
    accountId: string,
    pipeline: Pipeline,
    completedAt: string,
    usage: JobEvent['usage'],
  ): JobEvent =>
    harness.jobEvent(accountId, 'job.completed', {
      pipeline,
      usage,
      createdAt: completedAt,
      completedAt,
    });

  const report = (accountId: string) => call(billingEndpoints.getUsageReport, { accountId });

  it('sums the period per pipeline and per UTC day, with creditCost credits and zero days', async () => {
    const { accountId } = await harness.createAccount();
    const events = {
      bigText: completed(accountId, 'text', '2025-01-02T10:00:00.000Z', {
        inputBytes: 300 * KB,
        characters: 300_000,
      }),
      smallText: completed(accountId, 'text', '2025-01-02T23:59:59.999Z', {
        inputBytes: 10,
        characters: 10,
      }),
      image: completed(accountId, 'image', '2025-01-03T00:00:00.000Z', {
        inputBytes: 5 * MB + 1,
        megapixels: 1.5,
      }),
      audio: completed(accountId, 'audio', '2025-01-10T08:00:00.000Z', {
        inputBytes: MB,
        audioSeconds: 60.25,
      }),
      today: completed(accountId, 'text', JANUARY.toISOString(), {
        inputBytes: 20,
        characters: 20,
      }),
      december: completed(accountId, 'text', '2024-12-31T23:59:59.999Z', { inputBytes: 5 }),
    };
    const failed: JobEvent = {
      ...completed(accountId, 'text', '2025-01-04T00:00:00.000Z', null),
      event: 'job.failed',
      status: 'failed',
      error: 'boom',
    };
    for (const event of [...Object.values(events), failed]) await harness.publish(event);
    await harness.publish(events.image, `${events.image.jobId}:job.completed:again`);
    // Recorded before records carried their credits and day.
    await harness.db.collection<UsageDocument>('usage').insertOne({
      _id: newId('job'),
      accountId,
      pipeline: 'text',
      inputBytes: 250 * KB,
      audioSeconds: 0,
      megapixels: 0,
      characters: 250_000,
      completedAt: new Date('2025-01-05T12:00:00Z'),
    });
    await harness.eventsSettled();

    const cost = (event: JobEvent) => creditCost(event.pipeline, event.usage?.inputBytes ?? 0);
    const legacyCost = creditCost('text', 250 * KB);
    expect([cost(events.bigText), cost(events.image), legacyCost]).toEqual([3, 3, 3]);
    const textCredits = cost(events.bigText) + cost(events.smallText) + cost(events.today);

    const { period, pipelines, days } = await report(accountId);
    expect(period).toEqual({ start: '2025-01-01T00:00:00.000Z', end: '2025-02-01T00:00:00.000Z' });
    expect(pipelines).toEqual([
      {
        pipeline: 'audio',
        jobs: 1,
        inputBytes: MB,
        audioSeconds: 60.25,
        megapixels: 0,
        characters: 0,
        credits: cost(events.audio),
      },
      {
        pipeline: 'image',
        jobs: 1,
        inputBytes: 5 * MB + 1,
        audioSeconds: 0,
        megapixels: 1.5,
        characters: 0,
        credits: cost(events.image),
      },
      {
        pipeline: 'text',
        jobs: 4,
        inputBytes: 300 * KB + 10 + 20 + 250 * KB,
        audioSeconds: 0,
        megapixels: 0,
        characters: 300_000 + 10 + 20 + 250_000,
        credits: textCredits + legacyCost,
      },
    ]);
    const busyDays: Record<string, { jobs: number; credits: number }> = {
      '2025-01-02': { jobs: 2, credits: cost(events.bigText) + cost(events.smallText) },
      '2025-01-03': { jobs: 1, credits: cost(events.image) },
      '2025-01-05': { jobs: 1, credits: legacyCost },
      '2025-01-10': { jobs: 1, credits: cost(events.audio) },
      '2025-01-15': { jobs: 1, credits: cost(events.today) },
    };
    expect(days).toEqual(
      Array.from({ length: 15 }, (_, index) => {
        const day = `2025-01-${String(index + 1).padStart(2, '0')}`;
        return { day, ...(busyDays[day] ?? { jobs: 0, credits: 0 }) };
      }),
    );
    const stored = await harness.db
      .collection<UsageDocument>('usage')
      .findOne({ _id: events.image.jobId });
    expect(stored).toMatchObject({ credits: 3, completedDay: '2025-01-03' });
  });

  it('covers the anchored billing cycle, and is NOT_FOUND for unknown accounts', async () => {
    const { accountId } = await harness.createAccount({
      billingCycleAnchor: '2024-12-11T06:00:00Z',
    });
    // Cycles from 2024-12-11 06:00: the one containing now began on 2025-01-10 at 06:00.
    const before = completed(accountId, 'text', '2025-01-10T05:59:59.999Z', { inputBytes: 1 });
    const within = completed(accountId, 'text', '2025-01-10T06:00:00.000Z', { inputBytes: 1 });
    for (const event of [before, within]) await harness.publish(event);
    await harness.eventsSettled();
    const { period, pipelines, days } = await report(accountId);
    expect(period).toEqual({ start: '2025-01-10T06:00:00.000Z', end: '2025-02-09T06:00:00.000Z' });
    expect(pipelines.find((row) => row.pipeline === 'text')).toMatchObject({ jobs: 1, credits: 1 });
    expect(days).toEqual([
      { day: '2025-01-10', jobs: 1, credits: 1 },
      ...['11', '12', '13', '14', '15'].map((day) => ({
        day: `2025-01-${day}`,
        jobs: 0,
        credits: 0,
      })),
    ]);
    expect((await failure(report(newId('account')))).code).toBe('NOT_FOUND');
  });
});

function sha256(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}
