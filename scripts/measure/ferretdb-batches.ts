/**
 * What FerretDB (on PostgreSQL) charges per document when writes of several jobs go as one
 * command instead of one each: the question behind batching a hot write path.
 *
 *   node --import tsx scripts/measure/ferretdb-batches.ts [--documents 600] [--seed 20000]
 *
 * On one connection, as the services use it, over a collection already holding `--seed` job-like
 * documents of ~2.5 KB: inserts one at a time and as insertMany of 4 and 16, updates by `_id` one
 * at a time and as updateMany `_id: { $in }` of 4 and 16. Each cell is the CPU of FerretDB and
 * PostgreSQL (children included, from /proc) and the client's wall time, per document.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type Collection, MongoClient } from 'mongodb';
import { cpuSecondsOf, type NamedProcess } from '../bench/process-cpu';
import { launchInfrastructure } from '../infra/launcher';
import { provisionTools } from '../infra/provision';
import { table } from '../load/report';

const { values } = parseArgs({
  options: {
    documents: { type: 'string', default: '600' },
    seed: { type: 'string', default: '20000' },
  },
});
const DOCUMENTS = Number(values.documents);
const SEED = Number(values.seed);
const BATCHES = [1, 4, 16] as const;

interface JobLike {
  _id: string;
  accountId: string;
  status: string;
  payload: string;
  flag?: boolean;
}

const jobLike = (id: string): JobLike => ({
  _id: id,
  accountId: 'acct_1',
  status: 'created',
  payload: 'x'.repeat(2_400),
});

/** CPU ms of the servers and wall ms of the client, per document, over `run`. */
async function perDocument(servers: NamedProcess[], run: () => Promise<void>) {
  const total = (readings: Map<string, number>) =>
    [...readings.values()].reduce((sum, seconds) => sum + seconds, 0);
  const before = total(cpuSecondsOf(servers));
  const started = performance.now();
  await run();
  const wallMs = performance.now() - started;
  const cpuMs = (total(cpuSecondsOf(servers)) - before) * 1_000;
  return { cpu: (cpuMs / DOCUMENTS).toFixed(2), wall: (wallMs / DOCUMENTS).toFixed(2) };
}

async function inBatches(size: number, prefix: string, write: (ids: string[]) => Promise<unknown>) {
  for (let first = 0; first < DOCUMENTS; first += size) {
    const ids = Array.from(
      { length: Math.min(size, DOCUMENTS - first) },
      (_, offset) => `${prefix}_${String(first + offset).padStart(8, '0')}`,
    );
    await write(ids);
  }
}

async function measure(jobs: Collection<JobLike>, servers: NamedProcess[]) {
  const rows: Record<string, string>[] = [];
  for (const size of BATCHES) {
    const prefix = `job_b${size}`;
    const insert = await perDocument(servers, () =>
      inBatches(size, prefix, async (ids) => {
        if (ids.length === 1) await jobs.insertOne(jobLike(ids[0]!));
        else await jobs.insertMany(ids.map(jobLike), { ordered: false });
      }),
    );
    const update = await perDocument(servers, () =>
      inBatches(size, prefix, async (ids) => {
        if (ids.length === 1) await jobs.updateOne({ _id: ids[0]! }, { $set: { flag: true } });
        else await jobs.updateMany({ _id: { $in: ids } }, { $set: { flag: true } });
      }),
    );
    rows.push({
      'documents per command': String(size),
      'insert: server CPU ms/doc': insert.cpu,
      'insert: wall ms/doc': insert.wall,
      'update by _id: server CPU ms/doc': update.cpu,
      'update by _id: wall ms/doc': update.wall,
    });
  }
  return rows;
}

const log = (message: string) => process.stderr.write(`${message}\n`);
await provisionTools(['ferretdb', 'postgres', 'initdb'], log);
const dataDir = await mkdtemp(join(tmpdir(), 'tamp-ferretdb-batches-'));
const infrastructure = await launchInfrastructure({
  dataDir,
  env: { NATS_URL: 'unused', S3_ENDPOINT: 'unused' },
});
const servers = (['ferretdb', 'postgres'] as const).map((name) => ({
  name,
  pid: infrastructure.servers[name]?.pid(),
}));
const client = await new MongoClient(infrastructure.mongoUrl, { maxPoolSize: 1 }).connect();
try {
  const jobs = client.db('measure').collection<JobLike>('jobs');
  await jobs.createIndex({ accountId: 1, _id: -1 });
  for (let first = 0; first < SEED; first += 1_000) {
    const ids = Array.from(
      { length: Math.min(1_000, SEED - first) },
      (_, offset) => first + offset,
    );
    await jobs.insertMany(ids.map((index) => jobLike(`job_s${String(index).padStart(8, '0')}`)));
  }
  // Twice: the first pass warms both servers' caches and FerretDB's schema of the collection.
  await measure(jobs, servers);
  await jobs.deleteMany({ _id: { $gte: 'job_b', $lt: 'job_c' } });
  process.stdout.write(`${table(await measure(jobs, servers))}\n`);
} finally {
  await client.close();
  await infrastructure.stop();
  await rm(dataDir, { recursive: true, force: true });
}
