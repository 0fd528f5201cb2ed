/**
 * Where a job's CPU goes inside the Node services: every service runs with V8's sampling
 * profiler (preloaded from cpu-profiler.mjs) while one kind of job runs at saturation, and each service's profile
 * is summarized by self time per package (a dependency in node_modules, Node's own internals,
 * or a folder of this repository). Complements scripts/bench/job-cost.ts, which says how much
 * CPU each process spends; this says on what. FerretDB's own profile over the same window comes
 * from its pprof handler (its debug address, loopback only), summarized by `go tool pprof`.
 * `--kind idle` profiles a stack doing nothing (figures per second instead of per job), after
 * `--after-seconds` of the `--after` kind's load (2 s of inline text unless told), so that what a
 * load leaves running is seen.
 *
 *   node --import tsx scripts/measure/cpu-profile.ts [--kind text-inline|…|job-read|idle] [--seconds 20] [--keep]
 *     [--processes per-service|single] [--after audio-1s --after-seconds 60]
 *
 * Loopback only; the profiles are written to a temporary folder, removed afterwards unless --keep.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { type BenchStack, IDLE_SETTLE_MS, startBenchStack } from '../bench/bench-stack';
import { completedJobRead, loadReads, READ_CONNECTIONS } from '../bench/read-load';
import { PROJECT_ROOT } from '../infra/provision';
import { runInlineLoop, runQueuedBurst } from '../load/capacity';
import { table } from '../load/report';
import {
  JOB_KIND_NAMES,
  type JobKind,
  type JobKindName,
  prepareWorkload,
  workloadTools,
} from '../load/workload';
import { processModelOf } from '../stack/services';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  hitCount?: number;
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
}

const log = (message: string) => process.stderr.write(`[cpu-profile] ${message}\n`);

/** The package a frame belongs to: a dependency, Node itself, V8's own work, or a repo folder. */
function packageOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return 'node internals';
  const path = url.replace(/^file:\/\//, '');
  const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (dependency !== null) return dependency[1]!;
  const inRepo = relative(PROJECT_ROOT, path);
  if (!inRepo.startsWith('..')) return inRepo.split('/').slice(0, 3).join('/');
  return path;
}

/** Self time per package in ms, and the profile's duration, from one .cpuprofile. */
function summarize(profile: CpuProfile): { durationMs: number; byPackage: Map<string, number> } {
  const durationMs = (profile.endTime - profile.startTime) / 1000;
  const totalHits = profile.samples.length;
  const byPackage = new Map<string, number>();
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    if (hits === 0) continue;
    const name = packageOf(node.callFrame.url, node.callFrame.functionName);
    byPackage.set(name, (byPackage.get(name) ?? 0) + (hits / totalHits) * durationMs);
  }
  return { durationMs, byPackage };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      kind: { type: 'string', default: 'text-inline' },
      seconds: { type: 'string', default: '20' },
      keep: { type: 'boolean', default: false },
      processes: { type: 'string', default: 'per-service' },
      after: { type: 'string', default: 'text-inline' },
      'after-seconds': { type: 'string', default: '2' },
    },
  });
  const processes = processModelOf(values.processes);
  // `idle`: the `after` kind's load, then nothing; figures are per second instead of per job.
  const idle = values.kind === 'idle';
  // `job-read`: GETs of one finished inline text job, figures per read.
  const jobRead = values.kind === 'job-read';
  const kindName = (idle ? values.after : jobRead ? 'text-inline' : values.kind) as JobKindName;
  if (!JOB_KIND_NAMES.includes(kindName)) throw new Error(`unknown kind ${kindName}`);
  const profileDir = await mkdtemp(join(tmpdir(), 'tamp-cpu-profile-'));
  const stack = await startBenchStack({
    name: 'cpu-profile',
    tools: workloadTools([kindName]),
    log,
    processes,
    env: {
      NODE_OPTIONS: `--import ${join(PROJECT_ROOT, 'scripts/measure/cpu-profiler.mjs')}`,
      TAMP_CPU_PROFILE_DIR: profileDir,
    },
  });
  let jobs = 0;
  let goProfile: string | null = null;
  // Profiles are named after the process id; the services are named here before they stop.
  const serviceOf = new Map(
    stack.services.services.map((service) => [service.pid() ?? -1, service.name] as const),
  );
  try {
    const load = jobRead ? await readsOf(stack) : await jobsOf(stack, kindName);
    // A few jobs first (code compiled, connections warm), then every profile starts afresh.
    await load(idle ? Number(values['after-seconds']) : 2);
    // Idle: past the sweepers' first passes after start-up.
    if (idle) await sleep(IDLE_SETTLE_MS);
    for (const pid of serviceOf.keys()) process.kill(pid, 'SIGUSR2');
    log(`running ${values.kind} for about ${values.seconds} s`);
    const seconds = Number(values.seconds);
    const ferretdbProfile = captureFerretdbProfile(stack, seconds, profileDir);
    if (idle) {
      await sleep(seconds * 1000);
      jobs = seconds;
    } else {
      jobs = await load(seconds);
    }
    goProfile = await ferretdbProfile;
  } finally {
    // Profiles are written when each service exits, so the stack stops first.
    await stack.stop();
  }
  await report(profileDir, jobs, serviceOf, idle);
  if (goProfile !== null) reportGoProfile(goProfile, jobs);
  if (values.keep) log(`profiles kept in ${profileDir}`);
  else await rm(profileDir, { recursive: true, force: true });
}

/**
 * FerretDB's own CPU profile over the load window, from the pprof handler its debug address
 * serves (loopback only). Null, with a line on stderr, when it cannot be had.
 */
async function captureFerretdbProfile(
  stack: BenchStack,
  seconds: number,
  profileDir: string,
): Promise<string | null> {
  const metricsUrl = stack.infrastructure.servers.ferretdb?.metricsUrl;
  if (metricsUrl === undefined) return null;
  const url = new URL(`/debug/pprof/profile?seconds=${Math.max(1, seconds - 2)}`, metricsUrl);
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout((seconds + 30) * 1000) });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const file = join(profileDir, 'ferretdb.pprof');
    await writeFile(file, Buffer.from(await response.arrayBuffer()));
    return file;
  } catch (error) {
    log(`no FerretDB profile: ${(error as Error).message}`);
    return null;
  }
}

/** FerretDB's heaviest functions, cumulative, through `go tool pprof` (Go is a build tool here). */
function reportGoProfile(file: string, jobs: number): void {
  const top = spawnSync('go', ['tool', 'pprof', '-top', '-cum', '-nodecount=40', file], {
    encoding: 'utf8',
  });
  if (top.status !== 0) {
    log(`go tool pprof failed: ${top.stderr}`);
    return;
  }
  process.stdout.write(`\nFerretDB (Go pprof, ${jobs} jobs over the window)\n${top.stdout}\n`);
}

/** A load of `seconds`, answering how many jobs (or reads) it completed. */
type ProfiledLoad = (seconds: number) => Promise<number>;

/** `seconds` of a closed loop for an inline kind; a burst of 5 jobs per second for a queued one. */
async function jobsOf(stack: BenchStack, kindName: JobKindName): Promise<ProfiledLoad> {
  const [kind] = (await prepareWorkload(stack, stack.apiKey, [kindName])) as [JobKind];
  const target = { baseUrl: stack.publicUrl, apiKey: stack.apiKey };
  return async (seconds) => {
    const run =
      kind.mode === 'inline'
        ? await runInlineLoop(target, kind, seconds)
        : await runQueuedBurst(target, kind, seconds * 5);
    return run.finished.filter((job) => job.status === 'completed').length;
  };
}

/** GETs of one completed job, as job-cost.ts' job-read sends them. */
async function readsOf(stack: BenchStack): Promise<ProfiledLoad> {
  const read = await completedJobRead(stack);
  return async (seconds) =>
    (
      await loadReads({
        url: read.url,
        headers: read.headers,
        connections: READ_CONNECTIONS,
        seconds,
      })
    ).answered2xx;
}

/** One row per service: its top packages by self time per completed job. */
async function report(
  profileDir: string,
  jobs: number,
  serviceOf: ReadonlyMap<number, string>,
  idle: boolean,
): Promise<void> {
  const rows: Record<string, string | number>[] = [];
  for (const file of await readdir(profileDir)) {
    if (!file.endsWith('.cpuprofile')) continue;
    const profile = JSON.parse(await readFile(join(profileDir, file), 'utf8')) as CpuProfile;
    const { byPackage } = summarize(profile);
    const busy = [...byPackage].filter(([name]) => name !== '(idle)' && name !== '(program)');
    const total = busy.reduce((sum, [, ms]) => sum + ms, 0);
    if (total < jobs * 0.1) continue; // the launcher and idle helpers
    const top = busy
      .sort((a, b) => b[1] - a[1])
      .slice(0, 6)
      .map(([name, ms]) => `${name} ${(ms / jobs).toFixed(2)}`)
      .join(', ');
    // <pid>.<thread>.cpuprofile (cpu-profiler.mjs)
    const [pid, thread] = file.split('.');
    const name = serviceOf.get(Number(pid)) ?? `pid ${pid}`;
    rows.push({
      service: thread === '0' ? name : `${name} (thread ${thread})`,
      [idle ? 'ms/s on this thread' : 'ms/job on this thread']: (total / jobs).toFixed(2),
      'top packages (self ms/job)': top,
    });
  }
  process.stdout.write(
    `${jobs} ${idle ? 'seconds (figures per second)' : 'jobs'}\n${table(rows)}\n`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
