/**
 * How many jobs per second this stack sustains, per kind of job, on this machine:
 *
 *   node --import tsx scripts/load/capacity.ts [--kinds text-queued,audio-3s] [--scale 1]
 *     [--replicas 2]
 *
 * Starts fresh servers and every service (as `npm start` does), then for each kind on its own:
 * queued kinds get a burst of N creations and the rate is N ÷ (first creation → last job
 * terminal), i.e. the pipeline's drain rate at saturation; inline kinds get a closed loop of
 * concurrent clients for a fixed time. Creation latency (p50/p99, retries included) is measured
 * under that same load. `--replicas N` runs N processes of every service (startServices), to
 * check the capacity model (docs/capacity.md) against more than one replica. Prints one table;
 * nothing is asserted.
 */
import { parseArgs } from 'node:util';
import pLimit from 'p-limit';
import { startBenchStack } from '../bench/bench-stack';
import { busiest, stackCpuSeconds } from '../bench/process-cpu';
import { summarizeCreations, summarizeOutcomes, table } from './report';
import {
  type Creation,
  createWithRetries,
  drainJobs,
  type FinishedJob,
  runTraffic,
} from './traffic';
import {
  JOB_KIND_NAMES,
  type JobKind,
  type JobKindName,
  prepareWorkload,
  workloadTools,
} from './workload';

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
/** Clients of an inline kind's closed loop unless told otherwise. */
export const INLINE_CLIENTS = 4;
const INLINE_SECONDS = 20;

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

/** One saturation run of a kind: what was created, how each job ended, and how long it took. */
export interface SaturationRun {
  creations: Creation[];
  finished: FinishedJob[];
  /** First creation until the last job was seen terminal. */
  elapsedSec: number;
}

/** A burst of `jobs` queued creations, drained: the pipeline's rate at saturation. */
export async function runQueuedBurst(
  target: { baseUrl: string; apiKey: string },
  kind: JobKind,
  jobs: number,
): Promise<SaturationRun> {
  const started = performance.now();
  // Arrivals faster than any pipeline drains: creation and processing are both saturated.
  const creations = await runTraffic({
    ...target,
    kinds: [kind],
    ratePerSecond: 20,
    durationMs: (jobs / 20) * 1000,
  });
  const finished = await drainJobs(target, creations, 15 * 60_000);
  return { creations, finished, elapsedSec: (performance.now() - started) / 1000 };
}

/** `clients` clients creating one job after another for `seconds` (a closed loop). */
export async function runInlineLoop(
  target: { baseUrl: string; apiKey: string },
  kind: JobKind,
  seconds: number,
  clients: number = INLINE_CLIENTS,
): Promise<SaturationRun> {
  const creations: Creation[] = [];
  const endAt = performance.now() + seconds * 1000;
  const started = performance.now();
  const limit = pLimit(clients);
  await Promise.all(
    Array.from({ length: clients }, () =>
      limit(async () => {
        while (performance.now() < endAt) creations.push(await createWithRetries(target, kind));
      }),
    ),
  );
  const finished = await drainJobs(target, creations, 5 * 60_000);
  return { creations, finished, elapsedSec: (performance.now() - started) / 1000 };
}

function capacityRow(
  kind: JobKind,
  run: SaturationRun,
): Omit<CapacityRow, 'busiest process (CPU share)'> {
  const traffic = summarizeCreations(run.creations);
  const outcomes = summarizeOutcomes(run.finished);
  return {
    kind: kind.name,
    jobs: traffic.accepted,
    'jobs/s': (outcomes.completed / run.elapsedSec).toFixed(2),
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
      replicas: { type: 'string', default: '1' },
    },
  });
  const names = values.kinds.split(',') as JobKindName[];
  const scale = Number(values.scale);
  const log = (message: string) => process.stderr.write(`${message}\n`);
  const stack = await startBenchStack({
    name: 'capacity',
    tools: workloadTools(names),
    log,
    replicas: Number(values.replicas),
  });
  try {
    const kinds = await prepareWorkload(stack, stack.apiKey, names);
    const target = { baseUrl: stack.publicUrl, apiKey: stack.apiKey };
    const rows: CapacityRow[] = [];
    for (const kind of kinds) {
      log(`measuring ${kind.name}…`);
      const before = stackCpuSeconds(stack);
      const run =
        kind.mode === 'inline'
          ? await runInlineLoop(target, kind, INLINE_SECONDS * scale)
          : await runQueuedBurst(target, kind, Math.ceil(BURST[kind.name as JobKindName] * scale));
      rows.push({
        ...capacityRow(kind, run),
        'busiest process (CPU share)': busiest(before, stackCpuSeconds(stack)),
      });
      log(table(rows.slice(-1)));
    }
    process.stdout.write(`${table(rows)}\n`);
  } finally {
    await stack.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
