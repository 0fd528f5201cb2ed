import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@tamp/scripts/infra/processes';
import { toolPath } from '@tamp/scripts/infra/provision';
import { MongoClient, ObjectId } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import {
  connectMongo,
  type Db,
  type IndexSpecification,
  insertAllIfAbsent,
  insertEachIfAbsent,
  KeyedRepository,
  POOL_CHECK_INTERVAL_MS,
  provisionIndexes,
} from '../src/mongo';

const infrastructure = isolatedInfrastructure();
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  ({ client, db } = await connectMongo({
    url: infrastructure.mongoUrl,
    database: infrastructure.database,
    appName: 'kit-test',
  }));
});
afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

describe('MongoDB provisioning (against the MongoDB-wire server)', () => {
  const indexes: IndexSpecification[] = [
    { collection: 'jobs', name: 'account_created', keys: { accountId: 1, createdAt: -1 } },
    { collection: 'api_keys', name: 'hash_unique', keys: { hash: 1 }, unique: true },
  ];

  it('writes with majority write concern and retries writes and reads across a failover', async () => {
    expect(client.options.writeConcern?.w).toBe('majority');
    expect(client.options.retryWrites).toBe(true);
    expect(client.options.retryReads).toBe(true);
    // The standalone server the tests run against takes writes with it as they are.
    const probe = db.collection<{ _id: string }>('write_concern');
    await expect(probe.insertOne({ _id: 'majority' })).resolves.toMatchObject({
      acknowledged: true,
    });
  });

  it('checks its connection pool every POOL_CHECK_INTERVAL_MS, not every 100 ms', async () => {
    await db.command({ ping: 1 });
    // Driver internals: the canary for a driver that stops reading the setting.
    const topology = (client as unknown as { topology: { s: { servers: Map<string, unknown> } } })
      .topology;
    const pools = [...topology.s.servers.values()].map(
      (server) => (server as { pool: { options: { minPoolSizeCheckFrequencyMS: number } } }).pool,
    );
    expect(pools.length).toBeGreaterThan(0);
    for (const pool of pools) {
      expect(pool.options.minPoolSizeCheckFrequencyMS).toBe(POOL_CHECK_INTERVAL_MS);
    }
  });

  it('creates the indexes, and running again is harmless', async () => {
    await provisionIndexes(db, indexes);
    await provisionIndexes(db, indexes);
    const jobIndexes = await db.collection('jobs').indexes();
    expect(jobIndexes.map((index) => index.name)).toContain('account_created');
    const keyIndexes = await db.collection('api_keys').indexes();
    const unique = keyIndexes.find((index) => index.name === 'hash_unique');
    expect(unique?.unique).toBe(true);
  });

  it('replaces an index of an earlier release, and running again is harmless', async () => {
    const earlier: IndexSpecification = {
      collection: 'replaced',
      name: 'by_account',
      keys: { accountId: 1 },
    };
    // The same keys under a new name, as the job list's account index took over.
    const later: IndexSpecification = { ...earlier, name: 'by_account_newest' };
    // On a collection that does not exist yet, there is nothing to drop.
    await provisionIndexes(db, [{ ...earlier, collection: 'replaced_new', replaces: 'older' }]);
    await provisionIndexes(db, [earlier]);
    await provisionIndexes(db, [{ ...later, replaces: 'by_account' }]);
    await provisionIndexes(db, [{ ...later, replaces: 'by_account' }]);
    const names = (await db.collection('replaced').indexes()).map((index) => index.name);
    expect(names.sort()).toEqual(['_id_', 'by_account_newest']);
  });

  it('enforces a unique index', async () => {
    await provisionIndexes(db, indexes);
    await db.collection('api_keys').insertOne({ hash: 'abc' });
    await expect(db.collection('api_keys').insertOne({ hash: 'abc' })).rejects.toThrow(
      /duplicate key/i,
    );
  });

  it('makes guarded single-document updates atomic under concurrency (on FerretDB too)', async () => {
    const accounts = db.collection<{ _id: string; credits: number }>('accounts');
    await accounts.insertOne({ _id: 'acct_race', credits: 10 });
    const attempts = await Promise.all(
      Array.from({ length: 25 }, () =>
        accounts.updateOne({ _id: 'acct_race', credits: { $gte: 1 } }, { $inc: { credits: -1 } }),
      ),
    );
    expect(attempts.filter((result) => result.modifiedCount === 1)).toHaveLength(10);
    expect((await accounts.findOne({ _id: 'acct_race' }))?.credits).toBe(0);
  });

  it('keeps guarded updates atomic across connections, as replicas of a service use it', async () => {
    await expectAtomicAcrossConnections(infrastructure.mongoUrl, infrastructure.database);
  });

  it('lets exactly one of many concurrent guarded state transitions win', async () => {
    const jobs = db.collection<{ _id: string; status: string }>('jobs');
    await jobs.insertOne({ _id: 'job_race', status: 'created' });
    const attempts = await Promise.all(
      Array.from({ length: 20 }, () =>
        jobs.updateOne({ _id: 'job_race', status: 'created' }, { $set: { status: 'pending' } }),
      ),
    );
    expect(attempts.filter((result) => result.modifiedCount === 1)).toHaveLength(1);
  });

  it('accepts exactly one of many concurrent inserts with the same _id', async () => {
    const keys = db.collection<{ _id: string }>('idempotency');
    const attempts = await Promise.allSettled(
      Array.from({ length: 20 }, () => keys.insertOne({ _id: 'acct_1:key' })),
    );
    expect(attempts.filter((attempt) => attempt.status === 'fulfilled')).toHaveLength(1);
  });

  it('inserts a batch past the ids already taken, and counts what it inserted', async () => {
    const usage = db.collection<{ _id: string; n: number }>('batch_inserts');
    await usage.insertOne({ _id: 'job_b', n: 0 });
    const documents = ['job_a', 'job_b', 'job_c', 'job_a'].map((id, n) => ({ _id: id, n }));
    expect(await insertAllIfAbsent(usage, documents)).toBe(2);
    expect(await usage.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 'job_a', n: 0 },
      { _id: 'job_b', n: 0 },
      { _id: 'job_c', n: 2 },
    ]);
    expect(await insertAllIfAbsent(usage, documents)).toBe(0);
  });

  it('tells each document of one insert whether it went in, was taken, or failed', async () => {
    const entries = db.collection<{ _id: unknown; n: number }>('each_inserts');
    await entries.insertOne({ _id: 'job_taken', n: 0 });
    // An array is no _id: the server refuses that document alone and goes on past it.
    const ids: unknown[] = ['job_new', 'job_taken', ['not', 'an', 'id'], 'job_new', 'job_last'];
    const outcomes = await insertEachIfAbsent(
      entries,
      ids.map((id, n) => ({ _id: id, n })),
    );
    expect(
      outcomes.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : 'failed')),
    ).toEqual([true, false, 'failed', false, true]);
    expect(await entries.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 'job_last', n: 4 },
      { _id: 'job_new', n: 0 },
      { _id: 'job_taken', n: 0 },
    ]);
  });
});

describe('inserts of concurrent callers written together (KeyedRepository)', () => {
  class Claims extends KeyedRepository<{ _id: string; n: number }> {
    claim(id: string, n: number): Promise<boolean> {
      return this.insertIfAbsent({ _id: id, n });
    }
  }
  let monitored: { client: MongoClient; db: Db };
  const insertCommands: number[] = [];

  beforeAll(async () => {
    monitored = await connectMongo({
      url: infrastructure.mongoUrl,
      database: infrastructure.database,
      appName: 'kit-test-grouped',
      monitorCommands: true,
    });
    monitored.client.on('commandStarted', (event) => {
      if (event.commandName === 'insert') insertCommands.push(event.command.documents.length);
    });
  });
  afterAll(() => monitored.client.close());

  it('answers each caller as its own insert would, in fewer commands than callers', async () => {
    const claims = new Claims(monitored.db, 'grouped_claims');
    expect(await claims.claim('job_00', -1)).toBe(true);
    insertCommands.length = 0;
    // 30 callers at once: ids 0-19, each of 0-9 twice, and 00 taken already.
    const ids = Array.from({ length: 30 }, (_, n) => `job_${String(n % 20).padStart(2, '0')}`);
    const outcomes = await Promise.all(ids.map((id, n) => claims.claim(id, n)));
    // Per id exactly one caller wins, the first to ask, and none for the id taken before.
    const firstAsker = new Map<string, number>();
    for (const [n, id] of ids.entries()) if (!firstAsker.has(id)) firstAsker.set(id, n);
    expect(outcomes).toEqual(ids.map((id, n) => id !== 'job_00' && firstAsker.get(id) === n));
    expect(await monitored.db.collection('grouped_claims').countDocuments()).toBe(20);
    // Asked in one turn, so written together (the first insert alone when one is in flight).
    expect(insertCommands.reduce((sum, count) => sum + count, 0)).toBe(30);
    expect(insertCommands.length).toBeLessThan(30);
    expect(Math.max(...insertCommands)).toBeGreaterThan(1);
    // A quiet caller is written at once, alone.
    insertCommands.length = 0;
    expect(await claims.claim('job_99', 0)).toBe(true);
    expect(insertCommands).toEqual([1]);
  });
});

// FerretDB answers a page sorted by `_id` with a limit in PostgreSQL when it can apply the
// whole filter exactly (scripts/infra/ferretdb/keyset-pages.patch). A wrong page would be
// silent, so every page is compared with the same query without a limit, which FerretDB
// filters and sorts itself, cut to the page.
describe('pages sorted by _id (on FerretDB: answered by PostgreSQL)', () => {
  type Stored = { _id: unknown; accountId?: unknown; status?: string };
  const pages = () => db.collection<Stored>('keyset_pages');

  beforeAll(async () => {
    await provisionIndexes(db, [
      { collection: 'keyset_pages', name: 'account_newest', keys: { accountId: 1, _id: -1 } },
    ]);
    const documents: Stored[] = Array.from({ length: 600 }, (_, n) => ({
      _id: `job_${String(n).padStart(4, '0')}`,
      accountId: n % 3 === 0 ? 'acct_b' : n % 50 === 7 ? ['acct_a', 'acct_c'] : 'acct_a',
      ...(n % 7 === 0 ? {} : { status: n % 2 === 0 ? 'completed' : 'failed' }),
    }));
    // Ids MongoDB orders apart from strings (an ObjectId is a string inside FerretDB's
    // PostgreSQL rows), strings outside ASCII and upper case, and a string account that looks
    // like an ObjectId.
    documents.push(
      { _id: new ObjectId(), accountId: 'acct_a', status: 'completed' },
      { _id: 7, accountId: 'acct_a', status: 'completed' },
      { _id: true, accountId: 'acct_a', status: 'completed' },
      { _id: { nested: 1 }, accountId: 'acct_a', status: 'completed' },
      { _id: 'JOB_upper', accountId: 'acct_a', status: 'completed' },
      { _id: 'job_é', accountId: 'acct_a', status: 'completed' },
      { _id: 'job_hex', accountId: new ObjectId('0123456789abcdef01234567'), status: 'completed' },
    );
    await pages().insertMany(documents);
  });

  const filters: Record<string, unknown>[] = [
    { accountId: 'acct_a', status: { $exists: true }, _id: { $lt: 'job_~' } },
    { accountId: 'acct_a', status: { $exists: true }, _id: { $gt: 'job_', $lt: 'job_~' } },
    { _id: { $gte: '6', $lt: 'job_0010' } },
    { _id: { $lte: '000000000000000000000000' } },
    { accountId: 'acct_a', status: { $exists: true }, _id: { $lt: 'job_0300' } },
    { accountId: 'acct_a', status: 'failed', _id: { $gt: '', $lt: 'job_0400' } },
    { accountId: 'acct_c', _id: { $lte: 'job_0557' } },
    { accountId: 'acct_a', status: { $exists: false }, _id: { $gte: 'job_0100' } },
    { _id: { $gt: 'a' } },
    { _id: { $lt: 'job_0003' } },
    { accountId: '0123456789abcdef01234567', _id: { $lt: 'job_~' } },
    { accountId: 'acct_a', status: { $exists: true } },
    // The account id itself, not an array holding it: read along the ordered account index.
    { accountId: { $eq: 'acct_a', $not: { $type: 'array' } }, _id: { $gt: 'job_', $lt: 'job_~' } },
    { accountId: { $eq: 'acct_c', $not: { $type: 'array' } }, _id: { $lt: 'job_~' } },
    {
      accountId: { $eq: 'acct_b', $not: { $type: 'array' } },
      status: 'completed',
      _id: { $lt: 'job_0500' },
    },
    { accountId: { $eq: '0123456789abcdef01234567', $not: { $type: 'array' } }, _id: { $lt: 'z' } },
  ];

  it('answers every page as FerretDB does without a limit', async () => {
    for (const filter of filters) {
      for (const order of [1, -1] as const) {
        const whole = await pages().find(filter).sort({ _id: order }).toArray();
        for (const limit of [1, 5, 50]) {
          const page = await pages().find(filter).sort({ _id: order }).limit(limit).toArray();
          expect(page, JSON.stringify({ filter, order, limit })).toEqual(whole.slice(0, limit));
        }
      }
    }
  });

  it('leaves the sort and limit to PostgreSQL only for a filter it applies exactly', async () => {
    const pushedDown = async (filter: Record<string, unknown>) => {
      const explained = await pages().find(filter).sort({ _id: -1 }).limit(20).explain();
      return explained.limitPushdown === true;
    };
    expect(await pushedDown({ accountId: 'acct_a', _id: { $lt: 'job_~' } })).toBe(true);
    const scalar = { $eq: 'acct_a', $not: { $type: 'array' } };
    expect(await pushedDown({ accountId: scalar, _id: { $lt: 'job_~' } })).toBe(true);
    // No bound on _id, a number, an ObjectId's form: FerretDB sorts in memory, as before.
    expect(await pushedDown({ accountId: 'acct_a' })).toBe(false);
    expect(await pushedDown({ _id: { $lt: 5 } })).toBe(false);
    expect(await pushedDown({ accountId: '0123456789abcdef01234567', _id: { $lt: 'z' } })).toBe(
      false,
    );
  });
});

// The cluster's FerretDB (k8s/dependencies/ferretdb.yaml) runs the same binary on its SQLite
// backend, which needs the same compare-and-set (scripts/infra/ferretdb/).
describe("FerretDB's SQLite backend, as the local cluster runs it", () => {
  let server: ChildProcess;
  let stateDir: string;
  let url: string;

  beforeAll(async () => {
    stateDir = await mkdtemp(join(tmpdir(), 'kit-ferretdb-sqlite-'));
    const port = await freePort();
    server = spawn(
      toolPath('ferretdb'),
      [
        '--handler=sqlite',
        `--sqlite-url=file:${stateDir}/`,
        `--state-dir=${stateDir}`,
        `--listen-addr=127.0.0.1:${port}`,
        '--debug-addr=-',
        '--telemetry=disable',
        '--log-level=error',
      ],
      { stdio: 'ignore' },
    );
    url = `mongodb://127.0.0.1:${port}/`;
  });
  afterAll(async () => {
    server?.kill('SIGKILL');
    if (stateDir !== undefined) await rm(stateDir, { recursive: true, force: true });
  });

  it('keeps guarded updates atomic across connections, as replicas of a service use it', async () => {
    // The driver waits for the server to listen (server selection).
    await expectAtomicAcrossConnections(url, 'kit');
  });
});

/**
 * What replicas of one service rely on, over a pool of its own (the serialization connectMongo
 * may add plays no part here): guarded updates, claims and guarded deletes each decided once,
 * and no update lost to another one of the same document.
 */
async function expectAtomicAcrossConnections(url: string, database: string): Promise<void> {
  const pooled = new MongoClient(url, { maxPoolSize: 25, minPoolSize: 25 });
  try {
    const accounts = pooled
      .db(database)
      .collection<{ _id: string; credits: number; spent: number }>('accounts');
    await accounts.insertOne({ _id: 'acct_pool', credits: 10, spent: 0 });
    const decrements = await Promise.all(
      Array.from({ length: 25 }, () =>
        accounts.updateOne(
          { _id: 'acct_pool', credits: { $gte: 1 } },
          { $inc: { credits: -1, spent: 1 } },
        ),
      ),
    );
    expect(decrements.filter((result) => result.modifiedCount === 1)).toHaveLength(10);
    expect(await accounts.findOne({ _id: 'acct_pool' })).toEqual({
      _id: 'acct_pool',
      credits: 0,
      spent: 10,
    });

    const jobs = pooled.db(database).collection<{ _id: string; status: string }>('jobs');
    await jobs.insertOne({ _id: 'job_pool', status: 'created' });
    const claims = await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        jobs.findOneAndUpdate(
          { _id: 'job_pool', status: 'created' },
          { $set: { status: `claimed-${index}` } },
        ),
      ),
    );
    expect(claims.filter((claim) => claim !== null)).toHaveLength(1);

    // A guarded delete racing an update of the field it guards on: one of the two runs
    // first, so never both (a claim deleted although it was just handed to another job).
    const racing = pooled.db(database).collection<{ _id: string; jobId: string }>('claims');
    const ids = Array.from({ length: 100 }, (_, index) => `claim_${index}`);
    await racing.insertMany(ids.map((_id) => ({ _id, jobId: 'job_a' })));
    const outcomes = await Promise.all(
      ids.map(async (_id) => {
        const [deleted, moved] = await Promise.all([
          racing.deleteOne({ _id, jobId: 'job_a' }),
          racing.updateOne({ _id }, { $set: { jobId: 'job_b' } }),
        ]);
        return { deleted: deleted.deletedCount, moved: moved.modifiedCount };
      }),
    );
    expect(outcomes.filter((outcome) => outcome.deleted === 1 && outcome.moved === 1)).toEqual([]);

    // A worker's claim racing the write-behind confirmation of the job's publish (one update
    // of many jobs by id): both changes stay. Lost, the job went back to `created` after its
    // worker had claimed it, and that worker's completion was refused.
    const queued = pooled
      .db(database)
      .collection<{ _id: string; status: string; workPublished: boolean }>('queued');
    const jobIds = Array.from({ length: 100 }, (_, index) => `job_${index}`);
    await queued.insertMany(
      jobIds.map((_id) => ({ _id, status: 'created', workPublished: false })),
    );
    await Promise.all([
      ...jobIds.map((_id) =>
        queued.findOneAndUpdate({ _id, status: 'created' }, { $set: { status: 'pending' } }),
      ),
      ...[0, 25, 50, 75].map((from) =>
        queued.updateMany(
          { _id: { $in: jobIds.slice(from, from + 25) } },
          { $set: { workPublished: true } },
        ),
      ),
    ]);
    const lost = await queued
      .find({ $or: [{ status: 'created' }, { workPublished: false }] })
      .toArray();
    expect(lost).toEqual([]);
  } finally {
    await pooled.close();
  }
}
