/**
 * How many jobs per second this stack sustains, per kind of job, on this machine:
 *
 *   node --import tsx scripts/load/capacity.ts [--kinds text-queued,audio-3s] [--scale 1]
 *
 * Starts fresh servers and every service (as `npm start` does), then for each kind on its own:
 * queued kinds get a burst of N creations and the rate is N ÷ (first creation → last job
 * terminal), i.e. the pipeline's drain rate at saturation; inline kinds get a closed loop of
 * concurrent clients for a fixed time. Creation latency (p50/p99, retries included) is measured
 * under that same load. Prints one table; nothing is asserted.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import pLimit from 'p-limit';
import { type BenchStack, startBenchStack } from '../bench/bench-stack';
import { summarizeCreations, summarizeOutcomes, table } from './report';
import { type Creation, createWithRetries, drainJobs, runTraffic } from './traffic';
import { JOB_KIND_NAMES, type JobKind, type JobKindName, prepareWorkload } from './workload';

/** Jobs per burst at scale 1: enough for a steady drain rate, few enough to finish in minutes. */
const BURST: Record<JobKindName, number> = {
  'text-inline': 0,
  'text-queued': 60,
  'image-inline': 0,
  'image-avif': 60,
  'audio-1s': 40,
  'audio-3s': 30,
  'audio-20s': 10,
};
const INLINE_CLIENTS = 4;
const INLINE_SECONDS = 20;

interface ProcessTimes {
  ppid: number;
  /** Own CPU seconds, and those of children already reaped. */
  own: number;
  reaped: number;
}

/** utime+stime and cutime+cstime of every process, from /proc (USER_HZ = 100 on Linux). */
function processTimes(): Map<number, ProcessTimes> {
  const times = new Map<number, ProcessTimes>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Fields after the command name (which may hold spaces) start at ')'.
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(')')[1]!.trim().split(' ');
      times.set(Number(entry), {
        ppid: Number(fields[1]),
        own: (Number(fields[11]) + Number(fields[12])) / 100,
        reaped: (Number(fields[13]) + Number(fields[14])) / 100,
      });
    } catch {
      // Gone meanwhile.
    }
  }
  return times;
}

/**
 * CPU seconds used so far by each process of the stack with everything it started: ffmpeg under
 * the audio worker, PostgreSQL's backends under its postmaster.
 */
function cpuSeconds(stack: BenchStack): Map<string, number> {
  const times = processTimes();
  const children = new Map<number, number[]>();
  for (const [pid, { ppid }] of times) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  const tree = (pid: number): number => {
    const own = times.get(pid);
    if (own === undefined) return 0;
    return (
      own.own + own.reaped + (children.get(pid) ?? []).reduce((sum, child) => sum + tree(child), 0)
    );
  };
  const processes: [string, number | undefined][] = [
    ...stack.services.services.map((service): [string, number | undefined] => [
      service.name,
      service.pid(),
    ]),
    ...Object.values(stack.infrastructure.servers).map((server): [string, number | undefined] => [
      server.name,
      server.pid(),
    ]),
  ];
  return new Map(processes.map(([name, pid]) => [name, pid === undefined ? 0 : tree(pid)]));
}

/** The process that used the most CPU between two readings, with its share of the total. */
function busiest(before: Map<string, number>, after: Map<string, number>): string {
  const used = [...after].map(
    ([name, seconds]) => [name, seconds - (before.get(name) ?? 0)] as const,
  );
  const total = used.reduce((sum, [, seconds]) => sum + seconds, 0);
  const [name, seconds] = used.sort((a, b) => b[1] - a[1])[0] ?? ['-', 0];
  return `${name} ${Math.round((seconds / Math.max(total, 0.001)) * 100)} %`;
}

export type CapacityRow = {
  kind: string;
  jobs: number;
  'jobs/s': string;
  'p50 create ms': number;
  'p99 create ms': number;
  completed: number;
  failed: number;
  '503s': number;
  'busiest process (CPU share)': string;
};

export async function measureQueuedCapacity(
  target: { baseUrl: string; apiKey: string },
  kind: JobKind,
  jobs: number,
): Promise<Omit<CapacityRow, 'busiest process (CPU share)'>> {
  const started = performance.now();
  // Arrivals faster than any pipeline drains: creation and processing are both saturated.
  const creations = await runTraffic({
    ...target,
    kinds: [kind],
    ratePerSecond: 20,
    durationMs: (jobs / 20) * 1000,
  });
  const finished = await drainJobs(target, creations, 15 * 60_000);
  const elapsedSec = (performance.now() - started) / 1000;
  return row(kind, creations, finished, elapsedSec);
}

export async function measureInlineCapacity(
  target: { baseUrl: string; apiKey: string },
  kind: JobKind,
  seconds: number,
): Promise<Omit<CapacityRow, 'busiest process (CPU share)'>> {
  const creations: Creation[] = [];
  const endAt = performance.now() + seconds * 1000;
  const started = performance.now();
  const limit = pLimit(INLINE_CLIENTS);
  await Promise.all(
    Array.from({ length: INLINE_CLIENTS }, () =>
      limit(async () => {
        while (performance.now() < endAt) creations.push(await createWithRetries(target, kind));
      }),
    ),
  );
  const finished = await drainJobs(target, creations, 5 * 60_000);
  return row(kind, creations, finished, (performance.now() - started) / 1000);
}

function row(
  kind: JobKind,
  creations: Creation[],
  finished: Awaited<ReturnType<typeof drainJobs>>,
  elapsedSec: number,
): Omit<CapacityRow, 'busiest process (CPU share)'> {
  const traffic = summarizeCreations(creations);
  const outcomes = summarizeOutcomes(finished);
  return {
    kind: kind.name,
    jobs: traffic.accepted,
    'jobs/s': (outcomes.completed / elapsedSec).toFixed(2),
    'p50 create ms': traffic.creationP50Ms,
    'p99 create ms': traffic.creationP99Ms,
    completed: outcomes.completed,
    failed: outcomes.failed,
    '503s': traffic.answers503,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      kinds: { type: 'string', default: JOB_KIND_NAMES.join(',') },
      scale: { type: 'string', default: '1' },
    },
  });
  const names = values.kinds.split(',') as JobKindName[];
  const scale = Number(values.scale);
  const log = (message: string) => process.stderr.write(`${message}\n`);
  const stack = await startBenchStack({ name: 'capacity', toolsProfile: 'stack', log });
  try {
    const kinds = await prepareWorkload(stack, stack.apiKey, names);
    const target = { baseUrl: stack.publicUrl, apiKey: stack.apiKey };
    const rows: CapacityRow[] = [];
    for (const kind of kinds) {
      log(`measuring ${kind.name}…`);
      const before = cpuSeconds(stack);
      const row =
        kind.mode === 'inline'
          ? await measureInlineCapacity(target, kind, INLINE_SECONDS * scale)
          : await measureQueuedCapacity(
              target,
              kind,
              Math.ceil(BURST[kind.name as JobKindName] * scale),
            );
      rows.push({ ...row, 'busiest process (CPU share)': busiest(before, cpuSeconds(stack)) });
      log(table(rows.slice(-1)));
    }
    process.stdout.write(`${table(rows)}\n`);
  } finally {
    await stack.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
