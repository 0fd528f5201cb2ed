/**
 * Why the local stack runs FerretDB on PostgreSQL: its SQLite and PostgreSQL backends side by
 * side, on one connection.
 *
 *   node --import tsx scripts/measure/ferretdb-backends.ts
 *
 * 1. Latency of the operations a job makes (find by id, find by id + account, guarded updates)
 *    as the collection grows: SQLite pushes only an exact `{ _id }` filter down to SQL, so the
 *    others decode the whole collection each time.
 * 2. Atomicity: 25 concurrent guarded `$inc`s of a balance of 10 over 25 connections. Neither
 *    backend applies an update atomically, which is why services keep one connection each.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { launchInfrastructure } from '../infra/launcher';
import { freePort, spawnOwned, stopProcess, tcpOpen } from '../infra/processes';
import { provisionTools, toolPath } from '../infra/provision';
import { table } from '../load/report';

const SIZES = [100, 1_000, 3_000];
const ROUNDS = 50;

async function startSqliteFerretDb(dataDir: string) {
  await mkdir(dataDir, { recursive: true });
  const port = await freePort();
  const child = spawnOwned(
    toolPath('ferretdb'),
    [
      '--handler=sqlite',
      `--sqlite-url=file:${dataDir}/?_pragma=synchronous(NORMAL)`,
      `--state-dir=${dataDir}`,
      `--listen-addr=127.0.0.1:${port}`,
      '--debug-addr=-',
      '--telemetry=disable',
      '--log-level=warn',
    ],
    { env: { PATH: process.env.PATH ?? '' } },
  );
  for (let tries = 0; tries < 100 && !(await tcpOpen(port)); tries++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { url: `mongodb://127.0.0.1:${port}/`, stop: () => stopProcess(child) };
}

async function latencies(url: string, backend: string): Promise<Record<string, string | number>[]> {
  const client = await new MongoClient(url, { maxPoolSize: 1 }).connect();
  const jobs = client.db('measure').collection<Record<string, unknown> & { _id: string }>('jobs');
  const id = (index: number) => `job_${String(index).padStart(8, '0')}`;
  let size = 0;
  /** Over the newest jobs, as in a service: transitions happen to jobs created recently. */
  const time = async (operation: (index: number) => Promise<unknown>) => {
    const started = performance.now();
    for (let round = 0; round < ROUNDS; round++) await operation(size - 1 - round);
    return ((performance.now() - started) / ROUNDS).toFixed(1);
  };
  const rows = [];
  try {
    for (size of SIZES) {
      const have = await jobs.countDocuments();
      const documents = Array.from({ length: size - have }, (_, offset) => ({
        _id: id(have + offset),
        accountId: 'acct_1',
        status: 'created',
        attempts: 0,
        input: { kind: 'text', text: 'x'.repeat(200) },
      }));
      if (documents.length > 0) await jobs.insertMany(documents);
      rows.push({
        backend,
        jobs: size,
        'find {_id} ms': await time((index) => jobs.findOne({ _id: id(index) })),
        'find {_id, accountId} ms': await time((index) =>
          jobs.findOne({ _id: id(index), accountId: 'acct_1' }),
        ),
        'guarded update ms': await time((index) =>
          jobs.updateOne(
            { _id: id(index), status: 'created', attempts: 0 },
            { $set: { at: index } },
          ),
        ),
      });
    }
  } finally {
    await client.close();
  }
  return rows;
}

async function atomicity(url: string, backend: string): Promise<Record<string, string | number>> {
  const client = await new MongoClient(url, { maxPoolSize: 25 }).connect();
  const accounts = client.db('measure').collection<{ _id: string; credits: number }>('accounts');
  const outcomes: string[] = [];
  try {
    for (let round = 0; round < 3; round++) {
      await accounts.deleteMany({});
      await accounts.insertOne({ _id: 'a', credits: 10 });
      const results = await Promise.all(
        Array.from({ length: 25 }, () =>
          accounts.updateOne({ _id: 'a', credits: { $gte: 1 } }, { $inc: { credits: -1 } }),
        ),
      );
      const balance = (await accounts.findOne({ _id: 'a' }))?.credits;
      outcomes.push(`${results.filter((r) => r.modifiedCount === 1).length} ok → ${balance}`);
    }
  } finally {
    await client.close();
  }
  return { backend, 'of 25 decrements of 10 credits (3 rounds)': outcomes.join(', ') };
}

const log = (message: string) => process.stderr.write(`${message}\n`);
// Only the MongoDB-wire server: the stack's profile would also build MinIO, never started here.
await provisionTools(['ferretdb', 'postgres', 'initdb'], log);
const dataDir = await mkdtemp(join(tmpdir(), 'tamp-ferretdb-backends-'));
const sqlite = await startSqliteFerretDb(join(dataDir, 'sqlite'));
const postgres = await launchInfrastructure({
  dataDir: join(dataDir, 'postgres'),
  env: { NATS_URL: 'unused', S3_ENDPOINT: 'unused' },
});
try {
  const rows = [
    ...(await latencies(sqlite.url, 'sqlite')),
    ...(await latencies(postgres.mongoUrl, 'postgresql')),
  ];
  process.stdout.write(`${table(rows)}\n\n`);
  const atomic = [
    await atomicity(sqlite.url, 'sqlite'),
    await atomicity(postgres.mongoUrl, 'postgresql'),
  ];
  process.stdout.write(`${table(atomic)}\n`);
} finally {
  await sqlite.stop();
  await postgres.stop();
  await rm(dataDir, { recursive: true, force: true });
}
