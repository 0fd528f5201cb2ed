import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createTopology } from '@tamp/proto';
import { NATS_CLUSTER_FAULTS } from '@tamp/scripts/load/faults';
import { describe, expect, it } from 'vitest';
import {
  expectEveryJobCompletedOnce,
  expectExactBooks,
  expectRecoveryWithin30s,
  loadScenario,
} from '../support/load-scenario';

/**
 * Tamp on a three-node NATS cluster (three nats-server processes on loopback, routed, JetStream
 * on each), every service with NATS_STREAM_REPLICAS left at `auto`. Under a mixed stream the
 * node leading the JOBS stream is SIGKILLed and, once the API is back, restarted; then the new
 * leader, another node, is killed the same way. The books must come out as under every other
 * fault: nothing lost or run twice, money exact, the API back within 30 s each time.
 */
const run = loadScenario({
  name: 'nats-cluster',
  kinds: ['text-queued', 'text-inline', 'image-inline', 'image-avif'],
  burstKeys: 20,
  faults: [...NATS_CLUSTER_FAULTS, ...NATS_CLUSTER_FAULTS],
  faultSpacingMs: 30_000,
  drainMs: 5 * 60_000,
  natsNodes: 3,
});

/** Replicas of every stream the services made, the rate-limit bucket's (KV_…) included. */
async function streamReplicas(): Promise<Map<string, number>> {
  const replicas = new Map<string, number>();
  const nats = await connect({ servers: run.stack().infrastructure.natsUrl.split(',') });
  try {
    const manager = await jetstreamManager(nats);
    for await (const info of manager.streams.list()) {
      replicas.set(info.config.name, info.config.num_replicas);
    }
  } finally {
    await nats.close();
  }
  return replicas;
}

describe('on a three-node NATS cluster, losing the JOBS stream leader twice', () => {
  it('keeps three copies of every stream', async () => {
    const replicas = await streamReplicas();
    const topology = createTopology('');
    const expected = Object.values(topology.streams).map((stream) => stream.name);
    expect(Object.fromEntries(replicas)).toEqual(
      Object.fromEntries(expected.map((name) => [name, 3])),
    );
  });

  it('killed two different nodes, each the leader of JOBS when it died', () => {
    const killed = run.report().faults.map((fault) => fault.killedNode);
    expect(killed).toHaveLength(2);
    expect(new Set(killed).size).toBe(2);
  });

  it('completes every accepted job once, none failed, none lost', () => {
    expectEveryJobCompletedOnce(run.report());
  });

  it('keeps the books exact: one terminal event, one reservation, credits equal to the work', () => {
    expectExactBooks(run.report());
  });

  it('is back to normal within 30 s of each node dying', () => {
    expectRecoveryWithin30s(run.report());
  });
});
