import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import pLimit from 'p-limit';
import { type BenchStack, dataOf } from '../bench/bench-stack';
import {
  type Accounting,
  accountCredits,
  auditSettledBooks,
  type BooksSource,
  eventConsumerStates,
  violations,
} from './accounting';
import { type FaultName, type FaultOutcome, injectFault, Probe } from './faults';
import {
  type OutcomeSummary,
  percentile,
  summarizeCreations,
  summarizeOutcomes,
  type TrafficSummary,
  table,
} from './report';
import { type Creation, createWithRetries, drainJobs, runTraffic, settleDeferred } from './traffic';
import { type JobKind, type JobKindName, prepareLongJobs, prepareWorkload } from './workload';

/**
 * One load-and-fault run against a stack of its own: a burst of keyed creations, then a
 * sustained mixed stream with faults injected one after another while it runs, a drain, and
 * the audit of the books. Shared by `scripts/load/run.ts` (long form, report) and
 * `test/load` (short form, assertions).
 */
export interface ScenarioOptions {
  /** Keys × duplicates of the burst: every key sent this many times at once. */
  burst: { keys: number; duplicates: number };
  /** Creations per second of the stream, and how long it runs. */
  stream: { ratePerSecond: number; durationMs: number; kinds: readonly JobKindName[] };
  /** Injected in order during the stream, evenly spaced. */
  faults: readonly FaultName[];
  /** How long the drain may take after the stream. */
  drainMs: number;
  log?: (message: string) => void;
}

export interface ScenarioReport {
  burst: { keys: number; jobs: number; charged: number; expectedCharge: number };
  traffic: TrafficSummary;
  outcomes: OutcomeSummary;
  faults: FaultOutcome[];
  books: Accounting;
  problems: string[];
  /**
   * When the books are not exact: what the services logged about the jobs the problems name,
   * and every stream message they dropped or consumer that stopped (kit's stream-consumer).
   */
  evidence: string[];
  throughputPerSecond: number;
  /** Per job kind: creation latency and time to a terminal state, p50/p99 in ms. */
  latencies: Record<string, string | number>[];
}

/** Credits enough for any run: the books are checked to the credit, not the balance. */
const RUN_CREDITS = 1_000_000;

export async function runScenario(
  stack: BenchStack,
  options: ScenarioOptions,
): Promise<ScenarioReport> {
  const log = options.log ?? (() => {});
  const target = { baseUrl: stack.publicUrl, apiKey: stack.apiKey };
  const source = {
    ...target,
    adminUrl: stack.adminUrl,
    adminToken: stack.adminToken,
    accountId: stack.accountId,
    mongoUrl: stack.infrastructure.mongoUrl,
    natsUrl: stack.infrastructure.natsUrl,
  };
  await grantCredits(stack, RUN_CREDITS);
  const kinds = await prepareWorkload(stack, stack.apiKey, [
    ...new Set([...options.stream.kinds, 'text-queued', 'text-inline', 'image-inline'] as const),
  ]);
  const kind = (name: JobKindName) => kinds.find((candidate) => candidate.name === name)!;
  const killsWorkers = options.faults.some((fault) => fault.startsWith('kill-worker'));
  const longJobs = killsWorkers ? await prepareLongJobs(stack, stack.apiKey) : {};
  const creditsBefore = await accountCredits(source);

  log(`burst: ${options.burst.keys} keys × ${options.burst.duplicates}`);
  const burst = await runBurst(target, kind('text-queued'), options.burst);
  const charged = creditsBefore - (await accountCredits(source));

  const probe = new Probe(target, [kind('text-inline'), kind('image-inline')], longJobs);
  const streamKinds = options.stream.kinds.map(kind);
  log(`stream: ${options.stream.ratePerSecond}/s for ${options.stream.durationMs / 1000} s`);
  const started = performance.now();
  const [stream, faults] = await Promise.all([
    runTraffic({
      ...target,
      kinds: streamKinds,
      ratePerSecond: options.stream.ratePerSecond,
      durationMs: options.stream.durationMs,
    }),
    injectFaults(stack, probe, options, log),
  ]);
  const creations = [...burst.creations, ...stream, ...probe.creations];
  // Probe creations of unknown outcome were left unsettled so recovery times stay Tamp's own.
  await settleDeferred(target, probe.creations);
  log(`draining ${creations.filter((creation) => creation.jobId !== null).length} jobs`);
  const finished = await drainJobs(target, creations, options.drainMs);
  const elapsedSec = (performance.now() - started) / 1000;
  const books = await auditSettledBooks(source, creations, creditsBefore, 90_000);
  const outcomes = summarizeOutcomes(finished);
  return {
    burst: {
      keys: options.burst.keys,
      jobs: new Set(burst.creations.map((creation) => creation.jobId)).size,
      charged,
      expectedCharge: options.burst.keys * kind('text-queued').credits,
    },
    traffic: summarizeCreations([...burst.creations, ...stream]),
    outcomes,
    faults,
    books,
    problems: violations(books),
    evidence: await evidenceOf(stack, source, violations(books)),
    throughputPerSecond: Math.round((outcomes.completed / elapsedSec) * 100) / 100,
    latencies: latencyTable(creations, finished),
  };
}

async function grantCredits(stack: BenchStack, credits: number): Promise<void> {
  const response = await fetch(`${stack.adminUrl}/admin/accounts/${stack.accountId}/credits`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${stack.adminToken}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify({ credits }),
  });
  const body = (await response.json()) as { data?: unknown; error?: { code: string } };
  dataOf({ status: response.status, body }, 'credits add');
}

/**
 * Every key sent `duplicates` times at once: one job and one charge per key. The charge is
 * read from the account (its balance before and after), not from what the client saw.
 */
async function runBurst(
  target: { baseUrl: string; apiKey: string },
  kind: JobKind,
  burst: ScenarioOptions['burst'],
): Promise<{ creations: Creation[] }> {
  const keys = Array.from({ length: burst.keys }, () => randomUUID());
  const limit = pLimit(500);
  const creations = await Promise.all(
    keys.flatMap((key) =>
      Array.from({ length: burst.duplicates }, () =>
        limit(() => createWithRetries({ ...target, idempotencyKey: key }, kind)),
      ),
    ),
  );
  return { creations };
}

async function injectFaults(
  stack: BenchStack,
  probe: Probe,
  options: ScenarioOptions,
  log: (message: string) => void,
): Promise<FaultOutcome[]> {
  const outcomes: FaultOutcome[] = [];
  if (options.faults.length === 0) return outcomes;
  const spacing = options.stream.durationMs / (options.faults.length + 1);
  const started = performance.now();
  for (const [index, fault] of options.faults.entries()) {
    const due = started + spacing * (index + 1) - performance.now();
    if (due > 0) await sleep(due);
    log(`fault: ${fault}`);
    const outcome = await injectFault(stack, fault, probe);
    log(`  recovered in ${outcome.recoverySec} s`);
    outcomes.push(outcome);
  }
  return outcomes;
}

function latencyTable(
  creations: readonly Creation[],
  finished: Awaited<ReturnType<typeof drainJobs>>,
): Record<string, string | number>[] {
  const waited = new Map(finished.map((job) => [job.jobId, job.waitedMs]));
  const kinds = [...new Set(creations.map((creation) => creation.kind))].sort();
  return kinds.map((name) => {
    const ofKind = creations.filter((creation) => creation.kind === name && creation.jobId);
    const create = ofKind.map((creation) => creation.latencyMs);
    const done = ofKind.map((creation) => creation.latencyMs + (waited.get(creation.jobId!) ?? 0));
    return {
      kind: name,
      jobs: ofKind.length,
      'create p50': Math.round(percentile(create, 0.5)),
      'create p99': Math.round(percentile(create, 0.99)),
      'done p50': Math.round(percentile(done, 0.5)),
      'done p99': Math.round(percentile(done, 0.99)),
    };
  });
}

/**
 * Lines that say what happened to the jobs a violation names (see ScenarioReport.evidence), and
 * what the NATS servers warned about their streams and consumers (a consumer's ack floor ahead of
 * its stream after a restart skips what is stored again under the same sequence numbers).
 */
async function evidenceOf(
  stack: BenchStack,
  source: BooksSource,
  problems: readonly string[],
): Promise<string[]> {
  if (problems.length === 0) return [];
  const jobIds = problems.flatMap((problem) => problem.match(/\bjob_[0-9A-Za-z]+/g) ?? []);
  const services = stack
    .logsMentioning([...jobIds, 'invalid message dropped', 'stream consumer stopped'])
    .slice(-100);
  const nats = Object.values(stack.infrastructure.servers).filter((server) =>
    server?.name.startsWith('nats'),
  );
  const warnings = await Promise.all(
    nats.map(async (server) =>
      (await readFile(server!.logFile, 'utf8').catch(() => ''))
        .split('\n')
        .filter((line) => /\[(WRN|ERR)\].*(consumer|stream|Filestore)/i.test(line))
        .slice(-20)
        .map((line) => `${server!.name} | ${line}`),
    ),
  );
  const consumers = await eventConsumerStates(source).catch((error: unknown) => [
    `EVENTS' consumers could not be read: ${(error as Error).message}`,
  ]);
  return [...services, ...warnings.flat(), ...consumers];
}

export function formatReport(report: ScenarioReport): string {
  const { books, traffic, outcomes } = report;
  return [
    `burst: ${report.burst.keys} keys → ${report.burst.jobs} jobs`,
    `creations: ${traffic.creations}, accepted ${traffic.accepted}, given up ${traffic.notAccepted}, refused ${traffic.refused}, failures naming their job ${traffic.failuresNamingTheJob}`,
    `answers: 503 × ${traffic.answers503} (${traffic.answers503WithoutRetryAfter} without Retry-After), 409 × ${traffic.answers409}, 429 × ${traffic.answers429}, client time-outs ${traffic.timeouts}, network errors ${traffic.networkErrors}`,
    `creation latency (retries included): p50 ${traffic.creationP50Ms} ms, p99 ${traffic.creationP99Ms} ms`,
    `jobs: ${books.jobs} (completed ${outcomes.completed}, failed ${outcomes.failed}, unfinished ${outcomes.unfinished}; no answer named ${books.unanswered}; told not created yet existing ${books.createdThoughToldNot}; unsettled ${books.unsettled}); throughput ${report.throughputPerSecond} jobs/s`,
    ...(outcomes.failures.length > 0 ? [`failures: ${outcomes.failures.join('; ')}`] : []),
    `credits charged ${books.creditsCharged}, completed jobs worth ${books.creditsOfCompletedJobs}; lost ${books.lost}, event mismatches ${books.eventMismatches}, reservation mismatches ${books.reservationMismatches}, refund mismatches ${books.refundMismatches}, orphan reservations ${books.orphanReservations}`,
    '',
    table(report.latencies),
    '',
    report.faults.length === 0
      ? 'no faults injected'
      : table(
          report.faults.map((fault) => ({
            fault: fault.fault,
            'mid-job': fault.midJob === undefined ? '' : String(fault.midJob),
            '/readyz while paused': fault.readinessDuringPause ?? '',
            'recovery s': fault.recoverySec,
          })),
        ),
    '',
    report.problems.length === 0 ? 'books: exact' : `PROBLEMS: ${report.problems.join('; ')}`,
    ...report.evidence,
  ].join('\n');
}
