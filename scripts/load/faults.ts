import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createTopology, LIMITS, type Pipeline } from '@tamp/proto';
import type { BenchStack } from '../bench/bench-stack';
import type { NatsNodeName, ServerName } from '../infra/launcher';
import type { ServiceName } from '../stack/services';
import { type Creation, createWithRetries } from './traffic';
import type { JobKind } from './workload';

/**
 * Faults injected into a running stack, each by process id: what dies or stalls in production
 * (a worker OOM-killed mid-job, a service crashing, a broker or database pausing under a GC or
 * a noisy neighbour, a broker restart during a deploy).
 */
export const FAULTS = [
  'kill-worker-image',
  'kill-worker-text',
  'kill-worker-audio',
  'kill-job',
  'kill-job-mid-creation',
  'kill-billing',
  'pause-nats',
  'pause-ferretdb',
  'pause-postgres',
  'pause-minio',
  'restart-nats',
] as const;

/**
 * Faults of a stack whose NATS is a cluster (startBenchStack's natsNodes): SIGKILL of the node
 * that leads the JOBS stream, restarted once the API is back. Injected twice, the second kill
 * finds another leader, so two different nodes die in turn.
 */
export const NATS_CLUSTER_FAULTS = ['kill-nats-jobs-leader'] as const;

/**
 * Faults of a stack running two or more processes of each service (startBenchStack's
 * replicas): the SIGKILL of the first process of each service in turn, the workers' mid-job,
 * while the others carry the load.
 */
export const REPLICA_FAULTS = [
  'kill-gateway',
  'kill-upload',
  'kill-job',
  'kill-billing',
  'kill-webhook',
  'kill-worker-image',
  'kill-worker-text',
  'kill-worker-audio',
  'kill-operator',
] as const;

/**
 * The MongoDB-wire server SIGKILLed and started again a few seconds later: what a primary that
 * goes away and returns looks like to the driver (connections reset, then a server that answers
 * again), the part of a replica set's fail-over that can be played here (docs/dependencies.md).
 */
export const DATABASE_FAULTS = ['kill-ferretdb'] as const;

export type FaultName =
  | (typeof FAULTS)[number]
  | (typeof NATS_CLUSTER_FAULTS)[number]
  | (typeof REPLICA_FAULTS)[number]
  | (typeof DATABASE_FAULTS)[number];

export interface FaultOutcome {
  fault: FaultName;
  /**
   * For pauses: what the job service's /readyz answered while the server was stopped: `ready`,
   * the dependencies a 503 named, or `no answer` (a probe that times out is not an answer).
   */
  readinessDuringPause?: string;
  /** Whether a worker was running a job when it was killed (kill-worker-* only). */
  midJob?: boolean;
  /** Seconds from the end of the fault (process resumed, restarted or dead) to normal answers. */
  recoverySec: number;
  /** The NATS node killed (kill-nats-jobs-leader): the JOBS stream's leader at that moment. */
  killedNode?: string;
}

const PAUSE_MS = 15_000;
/** Longer than any creation may take to be answered (its budget), with a margin. */
const PATIENT_CLIENT_MS = LIMITS.createJobBudgetMs + 5_000;

export async function injectFault(
  stack: BenchStack,
  fault: FaultName,
  probe: Probe,
  options: { pauseMs?: number } = {},
): Promise<FaultOutcome> {
  const pauseMs = options.pauseMs ?? PAUSE_MS;
  const [action, ...rest] = fault.split('-');
  const target = rest.join('-');
  let midJob: boolean | undefined;
  let readinessDuringPause: string | undefined;
  if (fault === 'kill-job-mid-creation') {
    await killJobServiceMidCreation(stack, probe);
    return { fault, recoverySec: await probe.untilHealthy() };
  }
  if (fault === 'kill-nats-jobs-leader') return killJobsStreamLeader(stack, probe);
  if (fault === 'kill-ferretdb') {
    process.kill(serverPid(stack, 'ferretdb'), 'SIGKILL');
    await sleep(DATABASE_AWAY_MS);
    await stack.infrastructure.servers.ferretdb?.restart();
    // Counted from the database's return: while it is away nothing can be stored, by design.
    return { fault, recoverySec: await probe.untilHealthy() };
  }
  switch (action) {
    case 'kill': {
      const service = target as ServiceName;
      if (service.startsWith('worker-')) midJob = await untilRunningAJob(stack, service, probe);
      process.kill(servicePid(stack, service), 'SIGKILL');
      break;
    }
    case 'pause': {
      // The server and every process it forked: PostgreSQL serves each connection from a child
      // that starts a session of its own, so neither the postmaster alone nor its process group
      // would stop the queries already connected.
      const pids = processTree(serverPid(stack, target as ServerName));
      for (const pid of pids) signalIfAlive(pid, 'SIGSTOP');
      try {
        await sleep(pauseMs / 2);
        readinessDuringPause = await readiness(stack, 'job');
        await sleep(pauseMs / 2);
      } finally {
        for (const pid of pids.toReversed()) signalIfAlive(pid, 'SIGCONT');
      }
      break;
    }
    case 'restart':
      await stack.infrastructure.servers[target as ServerName]?.restart();
      break;
  }
  const recoverySec = await probe.untilHealthy();
  return {
    fault,
    ...(midJob !== undefined && { midJob }),
    ...(readinessDuringPause !== undefined && { readinessDuringPause }),
    recoverySec,
  };
}

/** How long the killed database stays away: longer than a replica set's election (~2-12 s). */
const DATABASE_AWAY_MS = 5_000;

/** Inline creations sent over a second, every 50 ms; the job service is killed halfway. */
const MID_CREATION_REQUESTS = 20;
const MID_CREATION_SPACING_MS = 50;

/**
 * SIGKILL of the job service while inline creations are inside it (admitted, reserved, at the
 * worker, storing): the answers those creations get must be true (docs/decisions.md#when-a-creation-fails),
 * which the audit checks; the client reads a job named with outcome unknown before creating again.
 */
async function killJobServiceMidCreation(stack: BenchStack, probe: Probe): Promise<void> {
  const sending = Array.from({ length: MID_CREATION_REQUESTS }, async (_, index) => {
    await sleep(index * MID_CREATION_SPACING_MS);
    return probe.createInline();
  });
  await sleep((MID_CREATION_REQUESTS * MID_CREATION_SPACING_MS) / 2);
  process.kill(servicePid(stack, 'job'), 'SIGKILL');
  await Promise.all(sending);
}

/** The NATS nodes each stack has had killed as the JOBS leader, so a second kill hits another. */
const killedJobsLeaders = new WeakMap<BenchStack, Set<NatsNodeName>>();

/**
 * SIGKILL of the NATS node leading the JOBS stream, as a lost machine: the API must come back
 * on the other two (a new leader, the stream's replicas). The node is restarted once it has, and
 * is back when its JetStream has caught up with the cluster (its /healthz).
 */
async function killJobsStreamLeader(stack: BenchStack, probe: Probe): Promise<FaultOutcome> {
  const killedBefore = killedJobsLeaders.get(stack) ?? new Set<NatsNodeName>();
  killedJobsLeaders.set(stack, killedBefore);
  const leader = await jobsStreamLeaderOtherThan(stack, killedBefore);
  process.kill(serverPid(stack, leader), 'SIGKILL');
  killedBefore.add(leader);
  const recoverySec = await probe.untilHealthy();
  await stack.infrastructure.servers[leader]?.restart();
  return { fault: 'kill-nats-jobs-leader', killedNode: leader, recoverySec };
}

/**
 * The server name of the JOBS stream's leader (the launcher names servers after their nodes),
 * once it is none of `avoid`. A restarted node may win the leadership back (the CI run at
 * be283c8 killed the same node twice), so such a leader is asked to step down until another
 * node leads; bounded, like every loop of the load tests.
 */
async function jobsStreamLeaderOtherThan(
  stack: BenchStack,
  avoid: ReadonlySet<NatsNodeName>,
): Promise<NatsNodeName> {
  const nats = await connect({ servers: stack.infrastructure.natsUrl.split(',') });
  try {
    const manager = await jetstreamManager(nats);
    const stream = createTopology('').streams.jobs.name;
    const deadline = performance.now() + 30_000;
    for (;;) {
      const leader = (await manager.streams.info(stream)).cluster?.leader as
        | NatsNodeName
        | undefined;
      if (leader === undefined)
        throw new Error('the JOBS stream has no leader: is NATS a cluster?');
      if (!avoid.has(leader)) return leader;
      if (performance.now() > deadline) throw new Error(`${leader} still leads JOBS after 30 s`);
      // JetStream's stream leader step-down, which nats.js does not wrap.
      await nats.request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, undefined, { timeout: 5_000 });
      await sleep(1_000);
    }
  } finally {
    await nats.close();
  }
}

/** A service's /readyz verdict: `ready`, the dependencies its 503 names (sorted), or `no answer`. */
async function readiness(stack: BenchStack, name: ServiceName): Promise<string> {
  const service = firstProcessOf(stack, name);
  try {
    const response = await fetch(`http://127.0.0.1:${service?.opsPort}/readyz`, {
      signal: AbortSignal.timeout(5_000),
    });
    const body = (await response.json().catch(() => ({}))) as { failures?: object };
    if (response.status === 200) return 'ready';
    return (
      Object.keys(body.failures ?? {})
        .sort()
        .join(',') || `${response.status}`
    );
  } catch {
    return 'no answer';
  }
}

/** `pid` and its descendants, parents first (Linux: /proc/<pid>/task/<tid>/children). */
function processTree(pid: number): number[] {
  const children = readdirSync(`/proc/${pid}/task`).flatMap((task) =>
    readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ').filter(Boolean),
  );
  return [pid, ...children.flatMap((child) => processTree(Number(child)))];
}

function signalIfAlive(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Gone meanwhile (a backend whose client left): nothing to stop or resume.
  }
}

/** A service's first process: the one a fault hits when it runs several (REPLICA_FAULTS). */
function firstProcessOf(stack: BenchStack, name: ServiceName) {
  return stack.services.services.find((service) => service.name === name && service.replica === 1);
}

function servicePid(stack: BenchStack, name: ServiceName): number {
  const pid = firstProcessOf(stack, name)?.pid();
  if (pid === undefined) throw new Error(`${name} is not running`);
  return pid;
}

function serverPid(stack: BenchStack, name: ServerName): number {
  const pid = stack.infrastructure.servers[name]?.pid();
  if (pid === undefined) throw new Error(`${name} was not started by this stack`);
  return pid;
}

/** Long jobs a kill sends at most, one every LONG_JOB_SPACING_CHECKS checks until caught. */
const LONG_JOBS_PER_KILL = 3;
const LONG_JOB_SPACING_CHECKS = 15;

/**
 * Waits (up to 30 s) until the worker's first process reports a queued job in flight; false if
 * it never does. The stream's own jobs of its pipeline are helped along by long ones sent
 * here: with two processes sharing the work, a job lands on the other one about half the time,
 * and a process of concurrency c holds at most c of them, so a few sent apart reach the first.
 */
async function untilRunningAJob(
  stack: BenchStack,
  name: ServiceName,
  probe: Probe,
): Promise<boolean> {
  const service = firstProcessOf(stack, name);
  const pipeline = name.replace('worker-', '') as Pipeline;
  for (let check = 0; check < 300; check++) {
    const sendsLongJob =
      check % LONG_JOB_SPACING_CHECKS === 0 && check < LONG_JOBS_PER_KILL * LONG_JOB_SPACING_CHECKS;
    if (sendsLongJob) await probe.createLongJob(pipeline);
    if ((await queuedJobsInFlight(service?.opsPort)) > 0) return true;
    await sleep(100);
  }
  return false;
}

/** The worker's queued jobs in flight from its metrics; 0 while it does not answer. */
async function queuedJobsInFlight(opsPort: number | undefined): Promise<number> {
  try {
    const metrics = await (
      await fetch(`http://127.0.0.1:${opsPort}/metrics`, { signal: AbortSignal.timeout(1_000) })
    ).text();
    const inFlight = /^tamp_jobs_in_flight\{[^}]*mode="queued"[^}]*\} (\d+)/m.exec(metrics);
    return Number(inFlight?.[1] ?? 0);
  } catch {
    return 0; // not answering yet (just restarted): looked at again
  }
}

/**
 * "Normal service": an inline text job and an inline image job (gateway, job service, billing,
 * the workers, the database and storage all take part) both answer 200 completed, and the job
 * list answers. Every probe job is a real job, returned in `creations` for the accounting.
 */
export class Probe {
  readonly creations: Creation[] = [];

  constructor(
    private readonly target: { baseUrl: string; apiKey: string },
    private readonly kinds: JobKind[],
    /** A long queued job per pipeline (prepareLongJobs), for the kills that must catch a worker. */
    private readonly longJobs: Partial<Record<Pipeline, JobKind>> = {},
  ) {}

  /** One long queued job for the pipeline's workers, audited like every probe job; none if unset. */
  async createLongJob(pipeline: Pipeline): Promise<void> {
    const kind = this.longJobs[pipeline];
    if (kind === undefined) return;
    this.creations.push(await createWithRetries(this.target, kind));
  }

  /** One inline creation of the first probe kind, as a client would retry it; audited too. */
  async createInline(): Promise<Creation> {
    const creation = await createWithRetries(
      { ...this.target, requestTimeoutMs: 60_000, giveUpAfterMs: 120_000 },
      this.kinds[0]!,
    );
    this.creations.push(creation);
    return creation;
  }

  /** Seconds until one round of probes succeeds, polling every 500 ms for at most `limitSec`. */
  async untilHealthy(limitSec = 180): Promise<number> {
    const started = performance.now();
    while ((performance.now() - started) / 1000 < limitSec) {
      if (await this.healthy()) return Math.round((performance.now() - started) / 100) / 10;
      await sleep(500);
    }
    return Number.POSITIVE_INFINITY;
  }

  private async healthy(): Promise<boolean> {
    const answers = await Promise.all(
      this.kinds.map((kind) =>
        createWithRetries(
          // As patient as the creation budget: a client that hangs up before Tamp answers
          // leaves a job it never learns about (the audit counts it as unnamed).
          {
            ...this.target,
            requestTimeoutMs: PATIENT_CLIENT_MS,
            giveUpAfterMs: 1,
            deferSettling: true,
          },
          kind,
        ),
      ),
    );
    this.creations.push(...answers);
    const listed = await fetch(`${this.target.baseUrl}/v1/jobs?limit=1`, {
      headers: { authorization: `Bearer ${this.target.apiKey}` },
      signal: AbortSignal.timeout(10_000),
    }).then(
      async (response) => {
        await response.body?.cancel();
        return response.status === 200;
      },
      () => false,
    );
    return listed && answers.every((answer) => answer.statusAtCreation === 'completed');
  }
}
