import { billingEndpoints, newId, type ServiceError } from '@tamp/proto';
import type { CommandStartedEvent } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccountDocument, LedgerEntry } from '../src/adapters/documents';
import { planCatalog } from '../src/domain/plans';
import { composeCredits } from '../src/service';
import { BillingHarness, failure } from './harness';

/**
 * Postings decide on the account as their replica last knew it, and fold the removal of their
 * markers into the account's next update. These tests make that state stale on purpose, with a
 * second replica of the credits application on the same database, and count the commands a
 * reservation costs.
 */
const harness = new BillingHarness(new Date('2025-03-10T08:00:00Z'));
const { call } = harness;
/** Commands billing sent, by command name and collection, while `counting` is on. */
let counting = false;
const commands: string[] = [];

function countCommand(event: CommandStartedEvent): void {
  if (!counting) return;
  commands.push(`${event.commandName} ${String(event.command[event.commandName])}`);
}

beforeAll(async () => {
  await harness.start({ onCommandStarted: countCommand });
});

afterAll(() => harness.stop());

/** The credits application as another billing replica runs it: its own last known states. */
function replica() {
  return composeCredits(harness.db, {
    plans: planCatalog(),
    clock: () => harness.clock,
    logger: harness.logger,
  });
}

async function account(accountId: string): Promise<AccountDocument> {
  const found = await harness.db
    .collection<AccountDocument>('accounts')
    .findOne({ _id: accountId });
  if (found === null) throw new Error(`no account ${accountId}`);
  return found;
}

async function balance(accountId: string) {
  const { allowanceRemaining, grantedRemaining } = await account(accountId);
  return { allowance: allowanceRemaining, granted: grantedRemaining };
}

const reservation = (accountId: string, credits: number) => ({
  accountId,
  jobId: newId('job'),
  credits,
  pipeline: 'text' as const,
});

describe('postings on a last known account state', () => {
  it('takes the allowance first although another replica refunded to it since', async () => {
    const { accountId } = await harness.createAccount({ credits: 2 });
    await call(billingEndpoints.addCredits, { accountId, credits: 5 });
    const first = replica();
    const second = replica();
    const earlier = reservation(accountId, 2);
    await first.credits.reserve(earlier);
    expect(await balance(accountId)).toEqual({ allowance: 0, granted: 5 });
    await second.credits.refund({ accountId, jobId: earlier.jobId });
    expect(await balance(accountId)).toEqual({ allowance: 2, granted: 5 });

    // The first replica last saw the allowance empty; taking from granted credits now would
    // break "allowance first".
    const later = reservation(accountId, 1);
    await first.credits.reserve(later);
    expect(await balance(accountId)).toEqual({ allowance: 1, granted: 5 });
    const entry = await harness.db
      .collection<LedgerEntry>('ledger')
      .findOne({ _id: `reserve:${later.jobId}` });
    expect(entry).toMatchObject({ state: 'applied', allowance: -1, granted: 0 });
    await Promise.all([first.postings.settle(), second.postings.settle()]);
  });

  it('refuses for want of credits only on what the database holds now', async () => {
    const { accountId } = await harness.createAccount({ credits: 3 });
    const first = replica();
    const second = replica();
    const earlier = reservation(accountId, 3);
    await first.credits.reserve(earlier);
    await second.credits.refund({ accountId, jobId: earlier.jobId });
    // The first replica last saw 0 credits; the account holds 3 again.
    expect(await first.credits.reserve(reservation(accountId, 3))).toEqual({
      reserved: 3,
      replayed: false,
    });
    const short = await failure(first.credits.reserve(reservation(accountId, 1)));
    expect(short.code).toBe('INSUFFICIENT_CREDITS');
    await Promise.all([first.postings.settle(), second.postings.settle()]);
  });

  it('moves exactly the available credits when two replicas reserve at once', async () => {
    const { accountId } = await harness.createAccount({ credits: 100 });
    await call(billingEndpoints.addCredits, { accountId, credits: 50 });
    const replicas = [replica(), replica()];
    const outcomes = await Promise.allSettled(
      Array.from({ length: 200 }, (_, index) =>
        replicas[index % 2]!.credits.reserve(reservation(accountId, 1)),
      ),
    );
    const refused = outcomes.flatMap((outcome) =>
      outcome.status === 'rejected' ? [(outcome.reason as ServiceError).code] : [],
    );
    expect(refused).toEqual(Array(50).fill('INSUFFICIENT_CREDITS'));
    expect(await balance(accountId)).toEqual({ allowance: 0, granted: 0 });
    const applied = await harness.db
      .collection<LedgerEntry>('ledger')
      .find({ accountId, kind: 'reserve', state: 'applied' })
      .toArray();
    expect(applied).toHaveLength(150);
    const taken = applied.reduce((sum, entry) => sum + entry.allowance! + entry.granted!, 0);
    expect(taken).toBe(-150);
    await Promise.all(replicas.map((each) => each.postings.settle()));
  });
});

describe('posting markers', () => {
  it('are removed once the postings are done, by the next update or on their own', async () => {
    const { accountId } = await harness.createAccount({ credits: 20 });
    await Promise.all(
      Array.from({ length: 10 }, () =>
        call(billingEndpoints.reserveCredits, reservation(accountId, 1)),
      ),
    );
    await expect
      .poll(async () => (await account(accountId)).postings, { timeout: 10_000 })
      .toEqual({});
    expect(await balance(accountId)).toEqual({ allowance: 10, granted: 0 });
  });
});

describe('what a reservation costs', () => {
  it('is three commands once the account is known: entry, guarded update, entry applied', async () => {
    const { accountId } = await harness.createAccount({ credits: 20 });
    await call(billingEndpoints.reserveCredits, reservation(accountId, 1));
    commands.length = 0;
    counting = true;
    try {
      await call(billingEndpoints.reserveCredits, reservation(accountId, 1));
    } finally {
      counting = false;
    }
    // The first reservation's marker goes out with this one's update, or in an update of its
    // own when a second passed before this one.
    const markerRemovals = commands.filter((command) => command === 'update accounts');
    expect(markerRemovals.length).toBeLessThanOrEqual(1);
    expect(commands.filter((command) => command !== 'update accounts')).toEqual([
      'insert ledger',
      'findAndModify accounts',
      'update ledger',
    ]);
  });
});
