import { billingEndpoints, LIMITS, MB, newId, type ServiceError } from '@tamp/proto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AccountDocument, ApiKeyDocument, LedgerEntry } from '../src/adapters/documents';
import { BillingHarness, failure } from './harness';

const JANUARY = new Date('2025-01-15T12:00:00Z');
const harness = new BillingHarness(JANUARY);
const { call } = harness;

beforeAll(async () => {
  await harness.start();
});

afterAll(() => harness.stop());

// The tests that move the clock leave it where the others expect it.
afterEach(() => {
  harness.resetClock();
});

async function balance(accountId: string) {
  const account = await harness.db
    .collection<AccountDocument>('accounts')
    .findOne({ _id: accountId });
  return { allowance: account?.allowanceRemaining, granted: account?.grantedRemaining };
}

const reserve = (accountId: string, jobId: string, credits: number) =>
  call(billingEndpoints.reserveCredits, { accountId, jobId, pipeline: 'image', credits });

describe('accounts and keys', () => {
  it('authenticates the key returned at creation, with the plan limits', async () => {
    const free = await harness.createAccount();
    expect(free.accountId).toMatch(/^acct_/);
    expect(free.apiKey).toMatch(/^sk_live_[0-9A-Za-z]{43}$/);
    expect(free.webhookSecret).toMatch(/^whsec_/);
    expect(await call(billingEndpoints.authenticate, { apiKey: free.apiKey })).toEqual({
      accountId: free.accountId,
      plan: 'free',
      maxUploadBytes: 25 * MB,
      rateLimitPerMinute: 60,
      keyId: expect.stringMatching(/^key_/),
    });
    const pro = await harness.createAccount({ plan: 'pro' });
    expect(await call(billingEndpoints.authenticate, { apiKey: pro.apiKey })).toMatchObject({
      plan: 'pro',
      maxUploadBytes: 100 * MB,
      rateLimitPerMinute: 600,
    });
    const upgraded = await call(billingEndpoints.updateAccount, {
      accountId: free.accountId,
      plan: 'pro',
      webhookUrl: 'https://example.com/hook',
    });
    expect(upgraded).toMatchObject({ plan: 'pro', maxUploadBytes: 100 * MB });
    expect(await call(billingEndpoints.getAccount, { accountId: free.accountId })).toMatchObject({
      webhookUrl: 'https://example.com/hook',
      webhookSecret: free.webhookSecret,
      billingCycleAnchor: null,
    });
  });

  it('keeps several keys active, and refuses revoked, unknown and malformed ones', async () => {
    const account = await harness.createAccount();
    const second = await call(billingEndpoints.createKey, { accountId: account.accountId });
    const { keys } = await call(billingEndpoints.listKeys, { accountId: account.accountId });
    expect(keys).toHaveLength(2);
    expect(keys.map((key) => key.displayPrefix)).toEqual([
      account.apiKey.slice(0, 12),
      second.apiKey.slice(0, 12),
    ]);
    const revoked = await call(billingEndpoints.revokeKey, { keyId: second.keyId });
    expect(revoked.revokedAt).not.toBeNull();
    expect(
      (await failure(call(billingEndpoints.authenticate, { apiKey: second.apiKey }))).code,
    ).toBe('UNAUTHORIZED');
    expect(await call(billingEndpoints.authenticate, { apiKey: account.apiKey })).toMatchObject({
      accountId: account.accountId,
    });
    const unknown = `sk_live_${'A'.repeat(43)}`;
    for (const apiKey of [unknown, 'sk_live_short', '', `${account.apiKey}x`]) {
      expect((await failure(call(billingEndpoints.authenticate, { apiKey }))).code).toBe(
        'UNAUTHORIZED',
      );
    }
    expect((await failure(call(billingEndpoints.revokeKey, { keyId: newId('apiKey') }))).code).toBe(
      'NOT_FOUND',
    );
  });

  it("bounds an account's keys: so many active, then the ones revoked last", async () => {
    const account = await harness.createAccount();
    const { accountId } = account;
    const keyDocument = (index: number, revokedAt: Date | null): ApiKeyDocument => ({
      _id: newId('apiKey'),
      hash: `${index}`.padStart(64, '0'),
      accountId,
      displayPrefix: 'sk_live_test',
      createdAt: new Date(JANUARY.getTime() + index * 1_000),
      revokedAt,
    });
    const revokedAt = (index: number) => new Date(JANUARY.getTime() + 3_600_000 + index * 1_000);
    const keys = harness.db.collection<ApiKeyDocument>('api_keys');
    const extraRevoked = LIMITS.listedRevokedApiKeys + 20;
    await keys.insertMany([
      ...Array.from({ length: LIMITS.activeApiKeysPerAccount - 1 }, (_, i) => keyDocument(i, null)),
      ...Array.from({ length: extraRevoked }, (_, i) => keyDocument(1_000 + i, revokedAt(i))),
    ]);

    // The account's own first key makes the limit: one more is refused until one is revoked.
    const refused = await failure(call(billingEndpoints.createKey, { accountId }));
    expect(refused.code).toBe('VALIDATION_ERROR');
    const listed = (await call(billingEndpoints.listKeys, { accountId })).keys;
    expect(listed.filter((key) => key.revokedAt === null)).toHaveLength(
      LIMITS.activeApiKeysPerAccount,
    );
    const revoked = listed.filter((key) => key.revokedAt !== null);
    // The revoked keys listed are the last ones revoked; the first 20 revoked are left out.
    expect(revoked.map((key) => key.revokedAt).sort()).toEqual(
      Array.from({ length: LIMITS.listedRevokedApiKeys }, (_, i) =>
        revokedAt(extraRevoked - LIMITS.listedRevokedApiKeys + i).toISOString(),
      ),
    );
    await call(billingEndpoints.revokeKey, { keyId: listed[0]!.keyId });
    expect((await call(billingEndpoints.createKey, { accountId })).apiKey).toMatch(/^sk_live_/);
  });

  it('stores only the hash of keys and a sealed webhook secret', async () => {
    const account = await harness.createAccount();
    const extra = await call(billingEndpoints.createKey, { accountId: account.accountId });
    const stored = JSON.stringify(
      await Promise.all(
        ['accounts', 'api_keys', 'ledger', 'usage'].map((name) =>
          harness.db.collection(name).find({}).toArray(),
        ),
      ),
    );
    for (const apiKey of [account.apiKey, extra.apiKey]) {
      expect(stored).not.toContain(apiKey);
      expect(stored).not.toContain(apiKey.slice(8));
    }
    expect(stored).not.toContain(account.webhookSecret.slice(6));
    const key = await harness.db.collection('api_keys').findOne({ _id: extra.keyId as never });
    expect(key?.hash).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('webhook secret rotation', () => {
  const DAY_MS = 24 * 60 * 60 * 1000;
  const later = (ms: number) => new Date(JANUARY.getTime() + ms);

  it('hands out a new sealed secret and keeps the old one signing for 24 hours', async () => {
    const { accountId, webhookSecret: original } = await harness.createAccount();
    const rotated = await call(billingEndpoints.rotateWebhookSecret, { accountId });
    expect(rotated).toEqual({
      webhookSecret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      previousValidUntil: later(DAY_MS).toISOString(),
    });
    expect(rotated.webhookSecret).not.toBe(original);
    expect(await call(billingEndpoints.getAccount, { accountId })).toMatchObject({
      webhookSecret: rotated.webhookSecret,
      previousWebhookSecret: { secret: original, validUntil: rotated.previousValidUntil },
    });
    // Sealed at rest, both of them.
    const stored = JSON.stringify(
      await harness.db.collection<AccountDocument>('accounts').findOne({ _id: accountId }),
    );
    for (const secret of [original, rotated.webhookSecret]) {
      expect(stored).not.toContain(secret.slice(6));
    }

    harness.moveClockTo(DAY_MS - 1);
    expect(
      (await call(billingEndpoints.getAccount, { accountId })).previousWebhookSecret?.secret,
    ).toBe(original);
    harness.moveClockTo(DAY_MS);
    const after = await call(billingEndpoints.getAccount, { accountId });
    expect(after).toMatchObject({
      webhookSecret: rotated.webhookSecret,
      previousWebhookSecret: null,
    });
    // Once expired it is dropped from storage too.
    const account = await harness.db
      .collection<AccountDocument>('accounts')
      .findOne({ _id: accountId });
    expect(account?.previousWebhookSecret).toBeNull();
  });

  it('takes a grace period per rotation; 0 retires the old secret at once', async () => {
    const { accountId } = await harness.createAccount();
    const hour = await call(billingEndpoints.rotateWebhookSecret, {
      accountId,
      gracePeriodSeconds: 3600,
    });
    expect(hour.previousValidUntil).toBe(later(3_600_000).toISOString());
    const immediate = await call(billingEndpoints.rotateWebhookSecret, {
      accountId,
      gracePeriodSeconds: 0,
    });
    expect(immediate.previousValidUntil).toBe(JANUARY.toISOString());
    expect(await call(billingEndpoints.getAccount, { accountId })).toMatchObject({
      webhookSecret: immediate.webhookSecret,
      previousWebhookSecret: null,
    });
    // Out-of-range periods never leave the caller: both ends validate with the proto schema.
    for (const gracePeriodSeconds of [-1, 1.5, 7 * 24 * 3600 + 1]) {
      expect(
        billingEndpoints.rotateWebhookSecret.request.safeParse({ accountId, gracePeriodSeconds })
          .success,
      ).toBe(false);
    }
  });

  it('keeps only the secret replaced last: rotating again ends the earlier grace at once', async () => {
    const { accountId, webhookSecret: first } = await harness.createAccount();
    const second = await call(billingEndpoints.rotateWebhookSecret, { accountId });
    const third = await call(billingEndpoints.rotateWebhookSecret, { accountId });
    const account = await call(billingEndpoints.getAccount, { accountId });
    expect(account.webhookSecret).toBe(third.webhookSecret);
    expect(account.previousWebhookSecret?.secret).toBe(second.webhookSecret);
    expect(JSON.stringify(account)).not.toContain(first);
  });

  it('applies concurrent rotations one after the other', async () => {
    const { accountId } = await harness.createAccount();
    const rotations = await Promise.all(
      Array.from({ length: 5 }, () => call(billingEndpoints.rotateWebhookSecret, { accountId })),
    );
    const handedOut = rotations.map((rotation) => rotation.webhookSecret);
    expect(new Set(handedOut).size).toBe(5);
    const account = await call(billingEndpoints.getAccount, { accountId });
    expect(handedOut).toContain(account.webhookSecret);
    expect(handedOut).toContain(account.previousWebhookSecret?.secret);
  });

  it('answers NOT_FOUND for unknown and malformed account ids', async () => {
    for (const accountId of [newId('account'), 'acct_nope', '']) {
      const error = await failure(call(billingEndpoints.rotateWebhookSecret, { accountId }));
      expect(error.code).toBe('NOT_FOUND');
      expect(error.httpStatus).toBe(404);
    }
  });
});

describe('billing cycle anchor', () => {
  it('moves the usage period to the 30-day cycle containing now, and back to the month', async () => {
    const { accountId } = await harness.createAccount();
    expect((await call(billingEndpoints.getUsage, { accountId })).period).toEqual({
      start: '2025-01-01T00:00:00.000Z',
      end: '2025-02-01T00:00:00.000Z',
    });
    // 2024-11-20 + 30 d = 2024-12-20, + 30 d = 2025-01-19: now (01-15) is in the second cycle.
    const updated = await call(billingEndpoints.updateAccount, {
      accountId,
      billingCycleAnchor: '2024-11-20T06:00:00+06:00',
    });
    expect(updated.billingCycleAnchor).toBe('2024-11-20T00:00:00.000Z');
    expect((await call(billingEndpoints.getUsage, { accountId })).period).toEqual({
      start: '2024-12-20T00:00:00.000Z',
      end: '2025-01-19T00:00:00.000Z',
    });
    await call(billingEndpoints.updateAccount, { accountId, billingCycleAnchor: null });
    expect((await call(billingEndpoints.getUsage, { accountId })).period.start).toBe(
      '2025-01-01T00:00:00.000Z',
    );
  });

  it('is accepted at creation', async () => {
    const { accountId } = await harness.createAccount({
      billingCycleAnchor: '2025-01-10T00:00:00Z',
    });
    expect((await call(billingEndpoints.getAccount, { accountId })).billingCycleAnchor).toBe(
      '2025-01-10T00:00:00.000Z',
    );
    expect((await call(billingEndpoints.getUsage, { accountId })).period).toEqual({
      start: '2025-01-10T00:00:00.000Z',
      end: '2025-02-09T00:00:00.000Z',
    });
  });

  it('resets the allowance when the anchored period starts after the current one', async () => {
    const { accountId } = await harness.createAccount({ credits: 5 });
    await reserve(accountId, newId('job'), 5);
    // A cycle from 2024-12-20 began before January 1: still the same allowance.
    await call(billingEndpoints.updateAccount, {
      accountId,
      billingCycleAnchor: '2024-12-20T00:00:00Z',
    });
    expect((await failure(reserve(accountId, newId('job'), 1))).code).toBe('INSUFFICIENT_CREDITS');
    // A cycle starting on January 10 is a new period: the plan allowance is back.
    await call(billingEndpoints.updateAccount, {
      accountId,
      billingCycleAnchor: '2025-01-10T00:00:00Z',
    });
    await reserve(accountId, newId('job'), 1);
    expect(await balance(accountId)).toEqual({ allowance: 99, granted: 0 });
  });

  it('refuses anchors in the future as VALIDATION_ERROR, and malformed ones by schema', async () => {
    const { accountId } = await harness.createAccount();
    const future = new Date(JANUARY.getTime() + 2 * 60_000).toISOString();
    const error = await failure(
      call(billingEndpoints.updateAccount, { accountId, billingCycleAnchor: future }),
    );
    expect(error.code).toBe('VALIDATION_ERROR');
    expect(error.details).toEqual([{ path: 'billingCycleAnchor', message: expect.any(String) }]);
    expect((await failure(harness.createAccount({ billingCycleAnchor: future }))).code).toBe(
      'VALIDATION_ERROR',
    );
    expect((await call(billingEndpoints.getAccount, { accountId })).billingCycleAnchor).toBeNull();
    for (const billingCycleAnchor of ['2025-01-15', '2025-02-30T00:00:00Z', 'yesterday', '']) {
      expect(
        billingEndpoints.updateAccount.request.safeParse({ accountId, billingCycleAnchor }).success,
        billingCycleAnchor,
      ).toBe(false);
    }
  });
});

describe('credits', () => {
  it('lets exactly the available credits through 200 concurrent reservations', async () => {
    const { accountId } = await harness.createAccount({ credits: 100 });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 200 }, () => reserve(accountId, newId('job'), 1)),
    );
    const succeeded = outcomes.filter((outcome) => outcome.status === 'fulfilled');
    const codes = outcomes.flatMap((outcome) =>
      outcome.status === 'rejected' ? [(outcome.reason as ServiceError).code] : [],
    );
    expect(succeeded).toHaveLength(100);
    expect(codes).toEqual(Array(100).fill('INSUFFICIENT_CREDITS'));
    expect(await balance(accountId)).toEqual({ allowance: 0, granted: 0 });
  });

  it('charges a replayed reservation once, and takes nothing when short', async () => {
    const { accountId } = await harness.createAccount({ credits: 10 });
    const jobId = newId('job');
    expect(await reserve(accountId, jobId, 4)).toEqual({ reserved: 4, replayed: false });
    const replays = await Promise.all([1, 2, 3].map(() => reserve(accountId, jobId, 4)));
    expect(replays).toEqual(Array(3).fill({ reserved: 4, replayed: true }));
    expect(await balance(accountId)).toEqual({ allowance: 6, granted: 0 });
    const short = await failure(reserve(accountId, newId('job'), 7));
    expect(short.code).toBe('INSUFFICIENT_CREDITS');
    expect(short.httpStatus).toBe(402);
    expect(await balance(accountId)).toEqual({ allowance: 6, granted: 0 });
  });

  it('takes the allowance before granted credits and refunds each bucket once', async () => {
    const { accountId } = await harness.createAccount({ credits: 2 });
    expect(await call(billingEndpoints.addCredits, { accountId, credits: 3 })).toEqual({
      accountId,
      grantedCredits: 3,
    });
    const jobId = newId('job');
    await reserve(accountId, jobId, 4);
    expect(await balance(accountId)).toEqual({ allowance: 0, granted: 1 });
    // What operators see (admin API, `account show`).
    expect((await call(billingEndpoints.getAccount, { accountId })).credits).toEqual({
      allowanceRemaining: 0,
      grantedRemaining: 1,
      available: 1,
    });
    const entry = await harness.db
      .collection<LedgerEntry>('ledger')
      .findOne({ _id: `reserve:${jobId}` });
    expect(entry).toMatchObject({ state: 'applied', allowance: -2, granted: -2 });
    const refund = { accountId, jobId };
    expect(await call(billingEndpoints.refundCredits, refund)).toEqual({
      refunded: 4,
      replayed: false,
    });
    expect(await call(billingEndpoints.refundCredits, refund)).toEqual({
      refunded: 4,
      replayed: true,
    });
    expect(await balance(accountId)).toEqual({ allowance: 2, granted: 3 });
  });

  it('releases a reservation that arrives after its refund: the late request moves nothing', async () => {
    const { accountId } = await harness.createAccount({ credits: 10 });
    const jobId = newId('job');
    // The creation gave up (its reserve timed out) and released the job before billing saw it.
    expect(await call(billingEndpoints.refundCredits, { accountId, jobId })).toEqual({
      refunded: 0,
      replayed: false,
    });
    const late = await failure(reserve(accountId, jobId, 3));
    expect(late.code).toBe('UNAVAILABLE');
    expect(await balance(accountId)).toEqual({ allowance: 10, granted: 0 });
    // A refund after the reservation is an ordinary refund, once.
    const other = newId('job');
    await reserve(accountId, other, 3);
    const refunds = await Promise.all(
      [1, 2, 3].map(() => call(billingEndpoints.refundCredits, { accountId, jobId: other })),
    );
    expect(refunds.map((refund) => refund.refunded)).toEqual([3, 3, 3]);
    expect(refunds.filter((refund) => !refund.replayed)).toHaveLength(1);
    expect(await balance(accountId)).toEqual({ allowance: 10, granted: 0 });
  });

  it('settles concurrent reservations and releases of the same jobs exactly once each', async () => {
    const { accountId } = await harness.createAccount({ credits: 100 });
    const jobIds = Array.from({ length: 40 }, () => newId('job'));
    // Each job's reserve and release race; whichever lands first, the account ends where it
    // began: a reservation either never happens or is given back.
    await Promise.all(
      jobIds.flatMap((jobId) => [
        reserve(accountId, jobId, 2).catch((error: unknown) => error),
        call(billingEndpoints.refundCredits, { accountId, jobId }),
      ]),
    );
    // A second release of each finds anything the first one missed.
    await Promise.all(
      jobIds.map((jobId) => call(billingEndpoints.refundCredits, { accountId, jobId })),
    );
    expect(await balance(accountId)).toEqual({ allowance: 100, granted: 0 });
  });

  it('resets the allowance at the period rollover and keeps granted credits', async () => {
    const { accountId } = await harness.createAccount({ credits: 5 });
    await call(billingEndpoints.addCredits, { accountId, credits: 10 });
    const januaryJob = newId('job');
    await reserve(accountId, januaryJob, 7);
    expect(await balance(accountId)).toEqual({ allowance: 0, granted: 8 });
    harness.clock = new Date('2025-02-03T00:00:00Z');
    await reserve(accountId, newId('job'), 1);
    expect(await balance(accountId)).toEqual({ allowance: 99, granted: 8 });
    // January's allowance is gone with January; the granted part comes back.
    expect(await call(billingEndpoints.refundCredits, { accountId, jobId: januaryJob })).toEqual({
      refunded: 2,
      replayed: false,
    });
    expect(await balance(accountId)).toEqual({ allowance: 99, granted: 10 });
  });

  it('converges after a crash before or after the balance update', async () => {
    const { accountId } = await harness.createAccount({ credits: 10 });
    const ledger = harness.db.collection<LedgerEntry>('ledger');
    const pending = (jobId: string): LedgerEntry => ({
      _id: `reserve:${jobId}`,
      kind: 'reserve',
      accountId,
      jobId,
      credits: 3,
      state: 'pending',
      allowance: null,
      granted: null,
      periodStart: null,
      createdAt: harness.clock,
      appliedAt: null,
    });
    // Died after the ledger insert, before the balance moved: the retry charges.
    const beforeUpdate = newId('job');
    await ledger.insertOne(pending(beforeUpdate));
    expect(await reserve(accountId, beforeUpdate, 3)).toEqual({ reserved: 3, replayed: false });
    expect(await balance(accountId)).toEqual({ allowance: 7, granted: 0 });
    // Died after the balance moved, before the ledger said so: the retry charges nothing.
    const afterUpdate = newId('job');
    await ledger.insertOne(pending(afterUpdate));
    const periodStart = new Date('2025-01-01T00:00:00Z');
    await harness.db.collection<AccountDocument>('accounts').updateOne(
      { _id: accountId },
      {
        $inc: { allowanceRemaining: -3, version: 1 },
        $set: { [`postings.reserve_${afterUpdate}`]: { allowance: -3, granted: 0, periodStart } },
      },
    );
    expect(await reserve(accountId, afterUpdate, 3)).toEqual({ reserved: 3, replayed: true });
    expect(await balance(accountId)).toEqual({ allowance: 4, granted: 0 });
    expect(await ledger.findOne({ _id: `reserve:${afterUpdate}` })).toMatchObject({
      state: 'applied',
      allowance: -3,
    });
  });
});

describe('job events', () => {
  it('moves no credits on a job.failed event: the job service refunds through refund-credits', async () => {
    const { accountId } = await harness.createAccount({ credits: 10 });
    const jobId = newId('job');
    await reserve(accountId, jobId, 3);
    await harness.publish(harness.jobEvent(accountId, 'job.failed', { jobId, inline: true }));
    await harness.eventsSettled();
    expect(await balance(accountId)).toEqual({ allowance: 7, granted: 0 });
    expect(await harness.db.collection('ledger').countDocuments({ jobId, kind: 'refund' })).toBe(0);

    await call(billingEndpoints.refundCredits, { accountId, jobId });
    await call(billingEndpoints.refundCredits, { accountId, jobId });
    expect(await balance(accountId)).toEqual({ allowance: 10, granted: 0 });
    expect(await harness.db.collection('ledger').countDocuments({ jobId, kind: 'refund' })).toBe(1);
  });

  it('sums usage of completed jobs in the current period, once per job', async () => {
    const { accountId } = await harness.createAccount();
    const audio = harness.jobEvent(accountId, 'job.completed', {
      pipeline: 'audio',
      usage: { inputBytes: 1000, audioSeconds: 90.5 },
    });
    const image = harness.jobEvent(accountId, 'job.completed', {
      pipeline: 'image',
      usage: { inputBytes: 2000, megapixels: 1.23456 },
    });
    const text = harness.jobEvent(accountId, 'job.completed', {
      usage: { inputBytes: 300, characters: 280 },
    });
    const secondText = harness.jobEvent(accountId, 'job.completed', {
      usage: { inputBytes: 20, characters: 20 },
    });
    const december = harness.jobEvent(accountId, 'job.completed', {
      completedAt: '2024-12-31T23:59:59.000Z',
      usage: { inputBytes: 5, characters: 5 },
    });
    const failed = harness.jobEvent(accountId, 'job.failed');
    for (const event of [audio, image, text, secondText, december, failed])
      await harness.publish(event);
    await harness.publish(image, `${image.jobId}:job.completed:again`);
    await harness.eventsSettled();
    expect(await call(billingEndpoints.getUsage, { accountId })).toEqual({
      period: { start: '2025-01-01T00:00:00.000Z', end: '2025-02-01T00:00:00.000Z' },
      audio: { requests: 1, inputBytes: 1000, minutes: 1.508 },
      text: { requests: 2, inputBytes: 320, characters: 300 },
      image: { requests: 1, inputBytes: 2000, megapixels: 1.235 },
      video: { requests: 0, inputBytes: 0, minutes: 0 },
    });
  });
});
