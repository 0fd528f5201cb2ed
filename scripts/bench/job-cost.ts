/**
 * What Tamp spends per job beyond the work itself, on an empty store and on a store seeded with
 * weeks of use, in one run:
 *
 *   node --import tsx scripts/bench/job-cost.ts [--kinds image-avif,text-queued,text-inline,
 *     image-inline,audio-1s,job-read,job-list,idle] [--seed-jobs 100000] [--seed-accounts 1000] [--scale 1]
 *     [--processes per-service|single] [--inline-clients 4] [--log-level info]
 *
 * Starts fresh servers and every service as its own process (bench-stack.ts), or all of them in
 * one with `--processes single`. First the bare
 * work of every kind, with the stack idle: the worker's own code for it and nothing around it,
 * one process per core at once (bare-work.ts); for job-read and job-list, a bare fastify route
 * answering the same JSON. Then each kind on its own at saturation after a short warm-up: queued kinds as a
 * burst, drained (the rate is completed jobs ÷ first creation to last job terminal, as
 * capacity.ts); inline kinds as a closed loop of clients (`--inline-clients`, 4) for a fixed time; job-read as
 * concurrent GETs of one completed job for a fixed time; job-list as concurrent GETs of the first
 * page of the account's job list (on the seeded store the account is its busiest, see
 * seed-store.ts); idle as nothing at all. Around each:
 * CPU of every process of the stack with its children (/proc: PostgreSQL's backends, ffmpeg),
 * MongoDB commands (FerretDB's metrics), PostgreSQL's scans and row changes
 * (pg_stat_user_tables) and NATS messages (/varz), divided by the jobs done (idle: by seconds).
 * Then the store is seeded (seed-store.ts), vacuumed and analysed, and every kind measured
 * again. Prints one table, and per kind the seeded ÷ empty CPU per job. The load clients run in
 * this process and are not counted. The services log at `--log-level`, by default the level
 * they run at when deployed (info), so what a deployment logs per job is counted too. Loopback
 * only; nothing is asserted.
 */
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { stopProcess } from '../infra/launcher';
import {
  INLINE_CLIENTS,
  runInlineLoop,
  runQueuedBurst,
  type SaturationRun,
} from '../load/capacity';
import { summarizeOutcomes, table } from '../load/report';
import {
  JOB_KIND_NAMES,
  type JobKind,
  type JobKindName,
  prepareWorkload,
  workloadTools,
} from '../load/workload';
import { processModelOf } from '../stack/services';
import { type BareRate, measureBareWork } from './bare-work';
import { type BenchStack, IDLE_SETTLE_MS, startBenchStack } from './bench-stack';
import { cpuSecondsOf, cpuUsedBetween, stackCpuSeconds } from './process-cpu';
import {
  completedJobRead,
  type JobRead,
  jobListRead,
  loadReads,
  READ_CONNECTIONS,
  startBareJobRead,
} from './read-load';
import { seedStore } from './seed-store';
import {
  activityBetween,
  type MessageCounts,
  messagesBetween,
  readMessageCounts,
  readTableActivity,
  type TableActivity,
  vacuumAnalyze,
  waitForPostgresStats,
} from './server-counters';

const MEASURED_KINDS = [...JOB_KIND_NAMES, 'job-read', 'job-list', 'idle'] as const;
type MeasuredKind = (typeof MEASURED_KINDS)[number];
const DEFAULT_KINDS: readonly MeasuredKind[] = [
  'image-avif',
  'text-queued',
  'text-inline',
  'image-inline',
  'audio-1s',
  'job-read',
  'job-list',
  'idle',
];

/**
 * How much of each load at --scale 1, sized so the default run takes about 20 minutes on the
 * 2-core development machine: enough jobs that warm-up and the drain's tail are a small part.
 */
const QUEUED_BURST_JOBS: Record<JobKindName, number> = {
  'text-inline': 0,
  'text-queued': 40,
  'image-inline': 0,
  'image-avif': 40,
  'audio-1s': 16,
  'audio-3s': 10,
  'audio-20s': 4,
};
const INLINE_SECONDS = 15;
const READ_SECONDS = 10;
const IDLE_SECONDS = 20;
const BARE_SECONDS = 8;
/**
 * Warm-up before each measured load, not scaled: JIT, connection pools, caches, and a busy
 * worker's every slot (the text worker's pipeline threads each load their token tables, about a
 * second of CPU, on first use after a minute idle).
 */
const WARMUP_QUEUED_JOBS = 6;
const WARMUP_SECONDS = 3;
/** Processes shown per row, by CPU. */
const TOP_PROCESSES = 4;

type Store = 'empty' | 'seeded';
type Target = { baseUrl: string; apiKey: string };

/** What one load did at saturation. */
interface Outcome {
  /** Jobs (job-read: reads) that ended, failed ones included; null for idle. */
  jobs: number | null;
  completedPerSec: number | null;
  failed: number;
  seconds: number;
}

/** One kind's load: its warm-up, its run at saturation, and its bare counterpart. */
interface Load {
  kind: MeasuredKind;
  warmUp(): Promise<void>;
  saturate(): Promise<Outcome>;
  /** The same work with nothing around it; null for idle. */
  measureBare(): Promise<BareRate | null>;
}

/** What the whole stack spent on one load. */
interface StackCost {
  outcome: Outcome;
  cpu: [name: string, seconds: number][];
  messages: MessageCounts;
  tables: TableActivity;
}

const log = (message: string) => process.stderr.write(`[job-cost] ${message}\n`);

function jobKindLoad(kind: JobKind, target: Target, scale: number, inlineClients: number): Load {
  const name = kind.name as JobKindName;
  const queued = kind.mode === 'queued';
  return {
    kind: name,
    warmUp: async () => {
      if (queued) await runQueuedBurst(target, kind, WARMUP_QUEUED_JOBS);
      else await runInlineLoop(target, kind, WARMUP_SECONDS);
    },
    saturate: async () =>
      jobOutcome(
        queued
          ? await runQueuedBurst(target, kind, Math.ceil(QUEUED_BURST_JOBS[name] * scale))
          : await runInlineLoop(target, kind, INLINE_SECONDS * scale, inlineClients),
      ),
    measureBare: () => measureBareWork(kind, BARE_SECONDS * scale),
  };
}

function jobOutcome(run: SaturationRun): Outcome {
  const { completed, failed, unfinished } = summarizeOutcomes(run.finished);
  if (unfinished > 0) log(`${unfinished} jobs did not finish in time; not counted`);
  return {
    jobs: completed + failed,
    completedPerSec: completed / run.elapsedSec,
    failed,
    seconds: run.elapsedSec,
  };
}

function readLoad(kind: 'job-read' | 'job-list', read: JobRead, scale: number): Load {
  const seconds = READ_SECONDS * scale;
  const reads = (url: string, headers: Record<string, string>, duration: number) =>
    loadReads({ url, headers, connections: READ_CONNECTIONS, seconds: duration });
  return {
    kind,
    warmUp: async () => {
      await reads(read.url, read.headers, WARMUP_SECONDS);
    },
    saturate: async () => {
      const load = await reads(read.url, read.headers, seconds);
      return {
        jobs: load.requests,
        completedPerSec: load.answered2xx / seconds,
        failed: load.non2xx + load.errors,
        seconds,
      };
    },
    measureBare: async () => {
      const bare = await startBareJobRead(read);
      try {
        await reads(bare.url, {}, WARMUP_SECONDS);
        const server = [{ name: 'bare', pid: bare.server.pid }];
        const before = cpuSecondsOf(server).get('bare') ?? 0;
        const load = await reads(bare.url, {}, seconds);
        const cpuSeconds = (cpuSecondsOf(server).get('bare') ?? 0) - before;
        return {
          jobsPerSec: load.answered2xx / seconds,
          cpuMsPerJob: (cpuSeconds * 1000) / Math.max(load.answered2xx, 1),
        };
      } finally {
        await stopProcess(bare.server, 5_000);
      }
    },
  };
}

/**
 * The stack doing nothing but its own housekeeping (heartbeats, sweepers, health checks), once
 * what the previous load left behind has settled.
 */
function idleLoad(scale: number): Load {
  const seconds = IDLE_SECONDS * scale;
  return {
    kind: 'idle',
    warmUp: () => sleep(IDLE_SETTLE_MS),
    saturate: async () => {
      await sleep(seconds * 1000);
      return { jobs: null, completedPerSec: null, failed: 0, seconds };
    },
    measureBare: async () => null,
  };
}

async function measureStackCost(stack: BenchStack, load: Load): Promise<StackCost> {
  const { servers } = stack.infrastructure;
  await load.warmUp();
  // The warm-up's statistics reach PostgreSQL's views before the first reading, the run's
  // before the second.
  await waitForPostgresStats();
  const tablesBefore = await readTableActivity(servers);
  const messagesBefore = await readMessageCounts(servers);
  const cpuBefore = stackCpuSeconds(stack);
  const outcome = await load.saturate();
  const cpuAfter = stackCpuSeconds(stack);
  const messagesAfter = await readMessageCounts(servers);
  await waitForPostgresStats();
  const tablesAfter = await readTableActivity(servers);
  if (outcome.failed > 0) log(`${load.kind}: ${outcome.failed} failed`);
  return {
    outcome,
    cpu: cpuUsedBetween(cpuBefore, cpuAfter),
    messages: messagesBetween(messagesBefore, messagesAfter),
    tables: activityBetween(tablesBefore, tablesAfter),
  };
}

async function measurePass(
  stack: BenchStack,
  loads: readonly Load[],
  store: Store,
): Promise<Map<MeasuredKind, StackCost>> {
  const costs = new Map<MeasuredKind, StackCost>();
  for (const load of loads) {
    log(`${store} store: measuring ${load.kind}…`);
    costs.set(load.kind, await measureStackCost(stack, load));
  }
  return costs;
}

/** Two significant figures, whole numbers from 100 on: 0.042, 4.2, 42.5, 425; `-` for none. */
function figure(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '-';
  if (value === 0) return '0';
  if (Math.abs(value) >= 100) return String(Math.round(value));
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toPrecision(2);
}

/** What a row divides by: the jobs done, or the seconds for idle (null when no job ended). */
function unitsOf(outcome: Outcome): number | null {
  if (outcome.jobs === null) return outcome.seconds;
  return outcome.jobs > 0 ? outcome.jobs : null;
}

function stackCpuMsPerUnit(cost: StackCost): number | null {
  const units = unitsOf(cost.outcome);
  if (units === null) return null;
  return (cost.cpu.reduce((sum, [, seconds]) => sum + seconds, 0) * 1000) / units;
}

function costRow(
  kind: MeasuredKind,
  store: Store,
  cost: StackCost,
  bare: BareRate | null,
): Record<string, string> {
  const units = unitsOf(cost.outcome) ?? Number.NaN;
  const per = (value: number) => figure(value / units);
  const cpuMs = stackCpuMsPerUnit(cost);
  const { tables, messages } = cost;
  return {
    kind: kind === 'idle' ? 'idle (per s)' : kind,
    store,
    'jobs/s': figure(cost.outcome.completedPerSec),
    'bare jobs/s': figure(bare?.jobsPerSec),
    ratio:
      cost.outcome.completedPerSec === null || bare === null
        ? '-'
        : figure(cost.outcome.completedPerSec / bare.jobsPerSec),
    'CPU ms/job': figure(cpuMs),
    'bare ms/job': figure(bare?.cpuMsPerJob),
    'overhead ms/job': cpuMs === null || bare === null ? '-' : figure(cpuMs - bare.cpuMsPerJob),
    'mongo cmds/job': per(messages.mongoCommands),
    'pg seq scans/job': per(tables.seqScans),
    'pg seq rows/job': per(tables.seqRowsRead),
    'pg idx scans/job': per(tables.indexScans),
    'pg ins/upd/del/job': [tables.rowsInserted, tables.rowsUpdated, tables.rowsDeleted]
      .map(per)
      .join('/'),
    'nats in/out/job': `${per(messages.natsIn)}/${per(messages.natsOut)}`,
    'mongo cmds/job by command': Object.entries(messages.mongoByCommand)
      .sort(([, a], [, b]) => b - a)
      .map(([command, count]) => `${command} ${per(count)}`)
      .join(', '),
    'top processes (CPU ms/job)': cost.cpu
      .slice(0, TOP_PROCESSES)
      .map(([name, seconds]) => `${name} ${figure((seconds * 1000) / units)}`)
      .join(', '),
  };
}

function seededOverEmpty(
  kind: MeasuredKind,
  empty: StackCost | undefined,
  seeded: StackCost | undefined,
): string {
  const before = empty === undefined ? null : stackCpuMsPerUnit(empty);
  const after = seeded === undefined ? null : stackCpuMsPerUnit(seeded);
  const unit = kind === 'idle' ? 'CPU ms/s' : 'CPU ms/job';
  if (before === null || after === null) return `${kind}: seeded ÷ empty ${unit} = -`;
  return `${kind}: seeded ÷ empty ${unit} = ${figure(after / before)} (${figure(before)} → ${figure(after)})`;
}

function parseOptions() {
  const { values } = parseArgs({
    options: {
      kinds: { type: 'string', default: DEFAULT_KINDS.join(',') },
      'seed-jobs': { type: 'string', default: '100000' },
      'seed-accounts': { type: 'string', default: '1000' },
      scale: { type: 'string', default: '1' },
      processes: { type: 'string', default: 'per-service' },
      'inline-clients': { type: 'string', default: String(INLINE_CLIENTS) },
      'log-level': { type: 'string', default: 'info' },
    },
  });
  const processes = processModelOf(values.processes);
  const kinds = values.kinds.split(',') as MeasuredKind[];
  const unknown = kinds.filter((kind) => !MEASURED_KINDS.includes(kind));
  if (unknown.length > 0) {
    throw new Error(`unknown kinds ${unknown.join(', ')}; known: ${MEASURED_KINDS.join(', ')}`);
  }
  const count = (name: string, value: string, minimum: number) => {
    const number = Number(value);
    if (!(number >= minimum)) throw new Error(`--${name} must be a number ≥ ${minimum}`);
    return number;
  };
  return {
    kinds,
    seedJobs: Math.floor(count('seed-jobs', values['seed-jobs'], 0)),
    seedAccounts: Math.floor(count('seed-accounts', values['seed-accounts'], 1)),
    scale: count('scale', values.scale, 0.01),
    inlineClients: Math.floor(count('inline-clients', values['inline-clients'], 1)),
    processes,
    logLevel: values['log-level'],
  };
}

/** Every requested kind's load, in the order asked, with what it needs prepared. */
async function prepareLoads(
  stack: BenchStack,
  kinds: readonly MeasuredKind[],
  scale: number,
  inlineClients: number,
): Promise<Load[]> {
  const jobKinds = await prepareWorkload(
    stack,
    stack.apiKey,
    kinds.filter((kind): kind is JobKindName =>
      (JOB_KIND_NAMES as readonly string[]).includes(kind),
    ),
  );
  const target = { baseUrl: stack.publicUrl, apiKey: stack.apiKey };
  const read = kinds.includes('job-read') ? await completedJobRead(stack) : undefined;
  const list = kinds.includes('job-list') ? await jobListRead(stack) : undefined;
  return kinds.map((kind) => {
    if (kind === 'idle') return idleLoad(scale);
    if (kind === 'job-read') return readLoad(kind, read!, scale);
    if (kind === 'job-list') return readLoad(kind, list!, scale);
    const jobKind = jobKinds.find((candidate) => candidate.name === kind)!;
    return jobKindLoad(jobKind, target, scale, inlineClients);
  });
}

async function main(): Promise<void> {
  const options = parseOptions();
  const loadAtStart = loadavg()[0]!;
  const stack = await startBenchStack({
    name: 'job-cost',
    tools: workloadTools(options.kinds),
    log,
    processes: options.processes,
    env: { LOG_LEVEL: options.logLevel },
  });
  try {
    const loads = await prepareLoads(stack, options.kinds, options.scale, options.inlineClients);
    const bare = new Map<MeasuredKind, BareRate | null>();
    for (const load of loads) {
      log(`bare work: ${load.kind}…`);
      bare.set(load.kind, await load.measureBare());
    }
    const empty = await measurePass(stack, loads, 'empty');

    log(`seeding ${options.seedAccounts} accounts and ${options.seedJobs} jobs…`);
    const seedingStarted = performance.now();
    await seedStore(stack, { accounts: options.seedAccounts, jobs: options.seedJobs }, log);
    const seedingSec = (performance.now() - seedingStarted) / 1000;
    const vacuumStarted = performance.now();
    await vacuumAnalyze(stack.infrastructure.servers);
    const vacuumSec = (performance.now() - vacuumStarted) / 1000;
    log(`seeded in ${Math.round(seedingSec)} s, VACUUM ANALYZE ${Math.round(vacuumSec)} s`);
    const seeded = await measurePass(stack, loads, 'seeded');

    const rows = loads.flatMap((load) =>
      (['empty', 'seeded'] as const).flatMap((store) => {
        const cost = (store === 'empty' ? empty : seeded).get(load.kind);
        return cost === undefined ? [] : [costRow(load.kind, store, cost, bare.get(load.kind)!)];
      }),
    );
    process.stdout.write(
      [
        `job cost, scale ${options.scale}, ${options.inlineClients} inline clients, services logging at ${options.logLevel}, ${options.processes === 'single' ? 'one process for every service' : 'a process per service'}, seeded store: ${options.seedAccounts} accounts and ${options.seedJobs} jobs (seeding ${Math.round(seedingSec)} s, VACUUM ANALYZE ${Math.round(vacuumSec)} s); load average ${figure(loadAtStart)} at start, ${figure(loadavg()[0])} at end`,
        table(rows),
        '',
        ...loads.map((load) =>
          seededOverEmpty(load.kind, empty.get(load.kind), seeded.get(load.kind)),
        ),
        '',
      ].join('\n'),
    );
  } finally {
    await stack.stop();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
