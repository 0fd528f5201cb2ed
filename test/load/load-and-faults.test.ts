import { FAULTS } from '@tamp/scripts/load/faults';
import { describe, expect, it } from 'vitest';
import {
  expectEveryJobCompletedOnce,
  expectExactBooks,
  expectRecoveryWithin30s,
  loadScenario,
} from '../support/load-scenario';

/**
 * The short form of the load-and-fault suite (the long form is scripts/load/run.ts): a stack
 * of its own, since its faults stop the servers; a burst of keyed twins; then a mixed stream
 * above what the workers drain while every fault is injected once: each worker SIGKILLed
 * mid-job, the job and billing services SIGKILLed (the job service once more while inline
 * creations are inside it), NATS, FerretDB, PostgreSQL and MinIO
 * paused for 15 s, NATS restarted. Then the books: nothing lost, each job terminal once,
 * charged once, credits exact, and normal service back within 30 s of every fault.
 */
const run = loadScenario({
  name: 'load-test',
  kinds: ['text-queued', 'text-inline', 'image-inline', 'image-avif', 'audio-3s'],
  burstKeys: 40,
  faults: FAULTS,
  faultSpacingMs: 25_000,
  drainMs: 8 * 60_000,
});

describe('under a burst, a sustained stream and every fault', () => {
  it('completes every accepted job, none failed, none lost, one job per Idempotency-Key', () => {
    expectEveryJobCompletedOnce(run.report());
  });

  it('keeps the books exact: one terminal event, one reservation, credits equal to the work', () => {
    expectExactBooks(run.report());
  });

  it('answers every 503 with Retry-After', () => {
    expect(run.report().traffic.answers503WithoutRetryAfter).toBe(0);
  });

  it('tells the truth about every creation, the job service killed mid-creation included', () => {
    const report = run.report();
    // Every creation of unknown outcome was settled by reading its job (the rest of the truth
    // of the answers is in expectExactBooks).
    expect(report.books.unsettled).toBe(0);
    expect(report.faults.map((fault) => fault.fault)).toContain('kill-job-mid-creation');
  });

  it('gives up on few creations: each fault costs at most a handful', () => {
    const report = run.report();
    expect(report.traffic.notAccepted).toBeLessThanOrEqual(report.faults.length * 3);
  });

  it('killed every worker while it ran a job', () => {
    const kills = run.report().faults.filter((fault) => fault.fault.startsWith('kill-worker'));
    expect(kills.map((kill) => kill.midJob)).toEqual([true, true, true]);
  });

  it('answers /readyz with a 503 naming the paused dependency (the job service uses all four)', () => {
    const pauses = run.report().faults.filter((fault) => fault.fault.startsWith('pause'));
    // FerretDB and the PostgreSQL behind it both show as the MongoDB-wire server.
    const named = { nats: 'nats', ferretdb: 'mongo', postgres: 'mongo', minio: 's3' } as const;
    for (const pause of pauses) {
      const server = pause.fault.replace('pause-', '') as keyof typeof named;
      expect(pause.readinessDuringPause?.split(','), pause.fault).toContain(named[server]);
    }
    expect(pauses).toHaveLength(4);
  });

  it('is back to normal within 30 s of each fault ending', () => {
    expectRecoveryWithin30s(run.report());
  });
});
