import { DATABASE_FAULTS, REPLICA_FAULTS } from '@tamp/scripts/load/faults';
import { SERVICE_NAMES } from '@tamp/scripts/stack/services';
import { describe, expect, it } from 'vitest';
import {
  expectEveryJobCompletedOnce,
  expectExactBooks,
  expectRecoveryWithin30s,
  loadScenario,
} from '../support/load-scenario';

/**
 * Two processes of every service at once (the gateway's behind a round-robin proxy, as behind
 * a Kubernetes Service), sharing NATS consumers, the MongoDB-wire server and storage. Under a
 * mixed stream the first process of each service is SIGKILLed in turn, each worker mid-job,
 * while the second carries on; last, the MongoDB-wire server is killed under all of them and
 * started again. Every job must end once, be charged once, and the books come out exact, with
 * the API back within 30 s of each kill.
 */
const run = loadScenario({
  name: 'replicas',
  kinds: ['text-queued', 'text-inline', 'image-inline', 'image-avif', 'audio-3s'],
  burstKeys: 20,
  faults: [...REPLICA_FAULTS, ...DATABASE_FAULTS],
  faultSpacingMs: 20_000,
  drainMs: 6 * 60_000,
  replicas: 2,
});

describe('two processes of every service, the first of each killed in turn, then the database', () => {
  it('ran two of each, and restarted only the first of each', () => {
    for (const name of SERVICE_NAMES) {
      const processes = run.stack().services.services.filter((service) => service.name === name);
      expect(
        processes.map((service) => [service.replica, service.restarts > 0]),
        name,
      ).toEqual([
        [1, true],
        [2, false],
      ]);
    }
  });

  it('completes every accepted job once, none failed, none lost', () => {
    expectEveryJobCompletedOnce(run.report());
  });

  it('keeps the books exact: one terminal event, one reservation, credits equal to the work', () => {
    expectExactBooks(run.report());
  });

  it('killed every worker while it ran a job', () => {
    const kills = run.report().faults.filter((fault) => fault.fault.startsWith('kill-worker'));
    expect(kills.map((kill) => kill.midJob)).toEqual([true, true, true]);
  });

  it('is back to normal within 30 s of each kill', () => {
    expectRecoveryWithin30s(run.report());
  });
});
