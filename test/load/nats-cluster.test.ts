import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createTopology } from '@tamp/proto';
import { type BenchStack, startBenchStack } from '@tamp/scripts/bench/bench-stack';
import { NATS_CLUSTER_FAULTS } from '@tamp/scripts/load/faults';
import { formatReport, runScenario, type ScenarioReport } from '@tamp/scripts/load/scenario';
import { type JobKindName, workloadTools } from '@tamp/scripts/load/workload';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Tamp on a three-node NATS cluster (three nats-server processes on loopback, routed, JetStream
 * on each), every service with NATS_STREAM_REPLICAS left at `auto`. Under a mixed stream the
 * node leading the JOBS stream is SIGKILLed and, once the API is back, restarted; then the new
 * leader, another node, is killed the same way. The books must come out as under every other
 * fault: nothing lost or run twice, money exact, the API back within 30 s each time.
 */
let stack: BenchStack;
let report: ScenarioReport;
const replicas = new Map<string, number>();

const STREAM_KINDS: JobKindName[] = ['text-queued', 'text-inline', 'image-inline', 'image-avif'];
const KILLS = [...NATS_CLUSTER_FAULTS, ...NATS_CLUSTER_FAULTS];

beforeAll(async () => {
  stack = await startBenchStack({
    name: 'nats-cluster',
    tools: workloadTools(STREAM_KINDS),
    log: () => {},
    natsNodes: 3,
  });
  await readReplicas();
  report = await runScenario(stack, {
    burst: { keys: 20, duplicates: 5 },
    stream: { ratePerSecond: 2, durationMs: KILLS.length * 30_000, kinds: STREAM_KINDS },
    faults: KILLS,
    drainMs: 5 * 60_000,
    log: (message) => console.log(message),
  });
  console.log(formatReport(report));
}, 15 * 60_000);

afterAll(async () => {
  await stack?.stop();
});

/** Replicas of every stream the services made, the rate-limit bucket's (KV_…) included. */
async function readReplicas(): Promise<void> {
  const nats = await connect({ servers: stack.infrastructure.natsUrl.split(',') });
  try {
    const manager = await jetstreamManager(nats);
    for await (const info of manager.streams.list()) {
      replicas.set(info.config.name, info.config.num_replicas);
    }
  } finally {
    await nats.close();
  }
}

describe('on a three-node NATS cluster, losing the JOBS stream leader twice', () => {
  it('keeps three copies of every stream and of the rate-limit bucket', () => {
    const topology = createTopology('');
    const expected = [
      ...Object.values(topology.streams).map((stream) => stream.name),
      'KV_RATE_LIMITS',
    ];
    expect(Object.fromEntries(replicas)).toEqual(
      Object.fromEntries(expected.map((name) => [name, 3])),
    );
  });

  it('killed two different nodes, each the leader of JOBS when it died', () => {
    const killed = report.faults.map((fault) => fault.killedNode);
    expect(killed).toHaveLength(2);
    expect(new Set(killed).size).toBe(2);
  });

  it('completes every accepted job once, none failed, none lost', () => {
    expect(report.books.lost).toBe(0);
    expect(report.outcomes.unfinished).toBe(0);
    expect(report.outcomes.failures).toEqual([]);
    expect(report.books.completed).toBe(report.books.jobs);
    expect(report.burst.jobs).toBe(report.burst.keys);
  });

  it('keeps the books exact: one terminal event, one reservation, credits equal to the work', () => {
    expect(report.problems).toEqual([]);
    expect(report.books.creditsCharged).toBe(report.books.creditsOfCompletedJobs);
    expect(report.burst.charged).toBe(report.burst.expectedCharge);
    expect(report.books.unanswered).toBe(0);
    expect(report.books.createdThoughToldNot).toBe(0);
  });

  it('is back to normal within 30 s of each node dying', () => {
    for (const fault of report.faults) {
      expect(fault.recoverySec, fault.killedNode).toBeLessThanOrEqual(30);
    }
  });
});
