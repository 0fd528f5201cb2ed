import { describe, expect, it } from 'vitest';
import {
  OPERATOR_NAME,
  type OperatorProcess,
  pollUntil,
  sleep,
  TEST_LEASE,
  useOperatorWorld,
} from './harness';

interface Lease {
  spec: { holderIdentity?: string; leaseTransitions?: number };
}

describe('leader election on a coordination.k8s.io Lease, two operator processes', () => {
  const world = useOperatorWorld();

  const holder = async (namespace: string) => {
    const { status, body } = await world.cluster.api<Lease>(
      'GET',
      `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${OPERATOR_NAME}`,
    );
    return status === 200 ? (body.spec.holderIdentity ?? '') : undefined;
  };
  const leaderOf = async (operators: OperatorProcess[]) => {
    const flags = await Promise.all(
      operators.map(async (operator) =>
        operator.exited ? 0 : await operator.metric('tamp_operator_leader'),
      ),
    );
    return flags.filter((flag) => flag === 1).length === 1
      ? operators[flags.indexOf(1)]
      : undefined;
  };

  async function twoOperators(prefix: string) {
    const { namespace, kubeconfig } = await world.namespace(prefix);
    await world.createDeployment(namespace, 'worker-text', 1);
    await world.applyPool(namespace, 'worker-text', {
      deployment: 'worker-text',
      pipeline: 'text',
      minReplicas: 1,
      maxReplicas: 8,
      targetBacklogPerReplica: 1,
      scaleDownStabilizationSeconds: 0,
      pollIntervalSeconds: 1,
    });
    const operators = await Promise.all([
      world.startOperator({ kubeconfig, namespace }),
      world.startOperator({ kubeconfig, namespace }),
    ]);
    const leader = await pollUntil('exactly one leader', () => leaderOf(operators), 20_000);
    const standby = operators.find((operator) => operator !== leader)!;
    expect(await holder(namespace)).toBe(leader.identity);
    return { namespace, leader, standby };
  }

  it('lets exactly one act; the standby takes over within the lease duration when the leader is killed', async () => {
    const { namespace, leader, standby } = await twoOperators('kill');
    await world.queueJobs('text', 3);
    await pollUntil(
      'the leader to scale to 3',
      async () => ((await world.replicas(namespace, 'worker-text')) === 3 ? true : undefined),
      15_000,
    );
    // The standby watches but never acts: every event, and every reconcile, is the leader's.
    await sleep(2_000);
    expect(await standby.metric('tamp_operator_leader')).toBe(0);
    expect(
      await standby.metric('tamp_operator_reconciles_total', { result: 'scaled' }),
    ).toBeUndefined();
    expect(await leader.metric('tamp_operator_reconciles_total', { result: 'scaled' })).toBe(1);

    await leader.kill();
    const killedAt = Date.now();
    await pollUntil(
      'the standby to lead',
      async () => ((await standby.metric('tamp_operator_leader')) === 1 ? true : undefined),
      (TEST_LEASE.durationSeconds + 5) * 1000,
      50,
    );
    const failOverMs = Date.now() - killedAt;
    expect(await holder(namespace)).toBe(standby.identity);
    // The lease runs out 4 s after the standby last saw it renewed (up to a retry period before
    // the kill), and the standby tries every 0.5 s (+ 20 % jitter); two seconds of slack for a
    // busy machine.
    expect(failOverMs).toBeGreaterThan(
      TEST_LEASE.durationSeconds * 1000 - 2 * TEST_LEASE.retryPeriodMs,
    );
    expect(failOverMs).toBeLessThanOrEqual(
      TEST_LEASE.durationSeconds * 1000 + 2 * TEST_LEASE.retryPeriodMs + 2_000,
    );
    console.log(
      `leader killed (SIGKILL): the standby led after ${failOverMs} ms (lease ${TEST_LEASE.durationSeconds} s)`,
    );

    // And it acts: more backlog, more replicas.
    await world.queueJobs('text', 2);
    await pollUntil(
      'the new leader to scale to 5',
      async () => ((await world.replicas(namespace, 'worker-text')) === 5 ? true : undefined),
      15_000,
    );
    await pollUntil(
      'the new leader to count its scale',
      async () =>
        (await standby.metric('tamp_operator_reconciles_total', { result: 'scaled' })) === 1
          ? true
          : undefined,
      5_000,
    );
  });

  it('releases the lease at once on a graceful stop, so the standby takes over without waiting', async () => {
    const { namespace, leader, standby } = await twoOperators('release');
    const stopping = leader.stop();
    const stoppedAt = Date.now();
    await pollUntil(
      'the lease released',
      async () => ((await holder(namespace)) !== leader.identity ? true : undefined),
      10_000,
      50,
    );
    await pollUntil(
      'the standby to lead',
      async () => ((await standby.metric('tamp_operator_leader')) === 1 ? true : undefined),
      (TEST_LEASE.durationSeconds + 5) * 1000,
      50,
    );
    const failOverMs = Date.now() - stoppedAt;
    await stopping;
    expect(await holder(namespace)).toBe(standby.identity);
    // Well inside the lease duration: a retry period or two, not the 4 s an expiry would take.
    expect(failOverMs).toBeLessThan(TEST_LEASE.durationSeconds * 1000);
    console.log(
      `leader stopped (SIGTERM): the standby led after ${failOverMs} ms (lease ${TEST_LEASE.durationSeconds} s)`,
    );
  });
});
