import { type BenchStack, startBenchStack } from '@tamp/scripts/bench/bench-stack';
import type { FaultName } from '@tamp/scripts/load/faults';
import { formatReport, runScenario, type ScenarioReport } from '@tamp/scripts/load/scenario';
import { type JobKindName, workloadTools } from '@tamp/scripts/load/workload';
import { afterAll, beforeAll, expect } from 'vitest';

/**
 * One load-and-fault run per test file (test/load): a stack of its own, since the faults stop
 * its processes, then a burst of keyed twins and a mixed stream of 2 creations/s with `faults`
 * injected `faultSpacingMs` apart. The report is printed, and read by the file's tests.
 */
export function loadScenario(options: {
  name: string;
  kinds: JobKindName[];
  burstKeys: number;
  faults: readonly FaultName[];
  faultSpacingMs: number;
  drainMs: number;
  natsNodes?: number;
  replicas?: number;
}): { stack(): BenchStack; report(): ScenarioReport } {
  let stack: BenchStack | undefined;
  let report: ScenarioReport | undefined;
  beforeAll(async () => {
    stack = await startBenchStack({
      name: options.name,
      tools: workloadTools(options.kinds),
      log: () => {},
      natsNodes: options.natsNodes,
      replicas: options.replicas,
    });
    report = await runScenario(stack, {
      burst: { keys: options.burstKeys, duplicates: 5 },
      stream: {
        ratePerSecond: 2,
        durationMs: options.faults.length * options.faultSpacingMs,
        kinds: options.kinds,
      },
      faults: options.faults,
      drainMs: options.drainMs,
      log: (message) => console.log(message),
    });
    console.log(formatReport(report));
  }, 20 * 60_000);
  afterAll(async () => {
    await stack?.stop();
  });
  return { stack: () => stack!, report: () => report! };
}

/** Every accepted job ended completed, once; the burst's twins made one job per key. */
export function expectEveryJobCompletedOnce(report: ScenarioReport): void {
  expect(report.books.lost).toBe(0);
  expect(report.outcomes.unfinished).toBe(0);
  expect(report.outcomes.failures).toEqual([]);
  expect(report.books.completed).toBe(report.books.jobs);
  expect(report.burst.jobs).toBe(report.burst.keys);
}

/**
 * The books where each fact lives agree: one terminal event and one reservation per job, credits
 * charged equal to the work done, each key charged once, and every answer true.
 */
export function expectExactBooks(report: ScenarioReport): void {
  expect(report.problems).toEqual([]);
  expect(report.books.creditsCharged).toBe(report.books.creditsOfCompletedJobs);
  expect(report.burst.charged).toBe(report.burst.expectedCharge);
  expect(report.books.unanswered).toBe(0);
  expect(report.books.createdThoughToldNot).toBe(0);
}

/** Normal service was back within 30 s of every fault. */
export function expectRecoveryWithin30s(report: ScenarioReport): void {
  for (const fault of report.faults) {
    expect(fault.recoverySec, fault.killedNode ?? fault.fault).toBeLessThanOrEqual(30);
  }
}
