import { type BenchStack, startBenchStack } from '@tamp/scripts/bench/bench-stack';
import { FAULTS } from '@tamp/scripts/load/faults';
import { formatReport, runScenario, type ScenarioReport } from '@tamp/scripts/load/scenario';
import { type JobKindName, workloadTools } from '@tamp/scripts/load/workload';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The short form of the load-and-fault suite (the long form is scripts/load/run.ts): a stack
 * of its own, since its faults stop the servers; a burst of keyed twins; then a mixed stream
 * above what the workers drain while every fault is injected once: each worker SIGKILLed
 * mid-job, the job and billing services SIGKILLed (the job service once more while inline
 * creations are inside it), NATS, FerretDB, PostgreSQL and MinIO
 * paused for 15 s, NATS restarted. Then the books: nothing lost, each job terminal once,
 * charged once, credits exact, and normal service back within 30 s of every fault.
 */
let stack: BenchStack;
let report: ScenarioReport;

const STREAM_KINDS: JobKindName[] = [
  'text-queued',
  'text-inline',
  'image-inline',
  'image-avif',
  'audio-3s',
];

beforeAll(async () => {
  stack = await startBenchStack({
    name: 'load-test',
    tools: workloadTools(STREAM_KINDS),
    log: () => {},
  });
  report = await runScenario(stack, {
    burst: { keys: 40, duplicates: 5 },
    stream: {
      ratePerSecond: 2,
      durationMs: FAULTS.length * 25_000,
      kinds: STREAM_KINDS,
    },
    faults: FAULTS,
    drainMs: 8 * 60_000,
    log: (message) => console.log(message),
  });
  console.log(formatReport(report));
}, 20 * 60_000);

afterAll(async () => {
  await stack?.stop();
});

describe('under a burst, a sustained stream and every fault', () => {
  it('makes one job and one charge per Idempotency-Key', () => {
    expect(report.burst.jobs).toBe(report.burst.keys);
    expect(report.burst.charged).toBe(report.burst.expectedCharge);
  });

  it('completes every accepted job, none failed, none lost', () => {
    expect(report.books.lost).toBe(0);
    expect(report.outcomes.unfinished).toBe(0);
    expect(report.outcomes.failures).toEqual([]);
    expect(report.books.completed).toBe(report.books.jobs);
  });

  it('keeps the books exact: one terminal event, one reservation, credits equal to the work', () => {
    expect(report.problems).toEqual([]);
    expect(report.books.creditsCharged).toBe(report.books.creditsOfCompletedJobs);
  });

  it('answers every 503 with Retry-After', () => {
    expect(report.traffic.answers503WithoutRetryAfter).toBe(0);
  });

  it('tells the truth about every creation, the job service killed mid-creation included', () => {
    // Every job is one some answer named; none exists that an answer said was not created;
    // every creation of unknown outcome was settled by reading its job.
    expect(report.books.unanswered).toBe(0);
    expect(report.books.createdThoughToldNot).toBe(0);
    expect(report.books.unsettled).toBe(0);
    expect(report.faults.map((fault) => fault.fault)).toContain('kill-job-mid-creation');
  });

  it('gives up on few creations: each fault costs at most a handful', () => {
    expect(report.traffic.notAccepted).toBeLessThanOrEqual(report.faults.length * 3);
  });

  it('killed every worker while it ran a job', () => {
    const kills = report.faults.filter((fault) => fault.fault.startsWith('kill-worker'));
    expect(kills.map((kill) => kill.midJob)).toEqual([true, true, true]);
  });

  it('answers /readyz with a 503 naming the paused dependency (the job service uses all four)', () => {
    const pauses = report.faults.filter((fault) => fault.fault.startsWith('pause'));
    // FerretDB and the PostgreSQL behind it both show as the MongoDB-wire server.
    const named = { nats: 'nats', ferretdb: 'mongo', postgres: 'mongo', minio: 's3' } as const;
    for (const pause of pauses) {
      const server = pause.fault.replace('pause-', '') as keyof typeof named;
      expect(pause.readinessDuringPause?.split(','), pause.fault).toContain(named[server]);
    }
    expect(pauses).toHaveLength(4);
  });

  it('is back to normal within 30 s of each fault ending', () => {
    for (const fault of report.faults) {
      expect(fault.recoverySec, fault.fault).toBeLessThanOrEqual(30);
    }
  });
});
