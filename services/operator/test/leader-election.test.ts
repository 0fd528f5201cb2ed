import { describe, expect, it } from 'vitest';
import { assertStaysTrue } from '../../../test/support/stays-true';
import {
  OPERATOR_NAME,
  type OperatorProcess,
  pollUntil,
  TEST_LEASE,
  useOperatorWorld,
} from './harness';

/** The lease of the graceful-stop test: 90 s, which no wait of that test comes near. */
const LONG_LEASE_SECONDS = 90;

interface Lease {
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    leaseTransitions?: number;
    acquireTime?: string;
    renewTime?: string;
  };
}

describe('leader election on a coordination.k8s.io Lease, two operator processes', () => {
  const world = useOperatorWorld();

  const lease = async (namespace: string) => {
    const { status, body } = await world.cluster.api<Lease>(
      'GET',
      `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${OPERATOR_NAME}`,
    );
    return status === 200 ? body.spec : undefined;
  };
  const holder = async (namespace: string) => {
    const spec = await lease(namespace);
    return spec === undefined ? undefined : (spec.holderIdentity ?? '');
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

  async function twoOperators(prefix: string, env: Record<string, string> = {}) {
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
      world.startOperator({ kubeconfig, namespace, env }),
      world.startOperator({ kubeconfig, namespace, env }),
    ]);
    const leader = await pollUntil('exactly one leader', () => leaderOf(operators), 20_000);
    const standby = operators.find((operator) => operator !== leader)!;
    expect(await holder(namespace)).toBe(leader.identity);
    return { namespace, leader, standby };
  }

  it("lets exactly one act; the standby takes over once the killed leader's lease has run out", async () => {
    const { namespace, leader, standby } = await twoOperators('kill');
    await world.queueJobs('text', 3);
    await pollUntil(
      'the leader to scale to 3',
      async () => ((await world.replicas(namespace, 'worker-text')) === 3 ? true : undefined),
      15_000,
    );
    // The standby watches but never acts: every event, and every reconcile, is the leader's.
    // Nothing announces "the standby did not act", so it is watched for 2 s: four of its tries
    // at the lease (every 0.5 s) and two of the pool's polls (every second) by the leader.
    await assertStaysTrue(
      async () => {
        expect(await standby.metric('tamp_operator_leader')).toBe(0);
        expect(
          await standby.metric('tamp_operator_reconciles_total', { result: 'scaled' }),
        ).toBeUndefined();
      },
      { forMs: 2_000, intervalMs: 250, what: 'the standby staying idle' },
    );
    expect(await leader.metric('tamp_operator_reconciles_total', { result: 'scaled' })).toBe(1);

    // The leader's last renewal is this one or a later one.
    const before = (await lease(namespace))!;
    expect(before.holderIdentity).toBe(leader.identity);
    await leader.kill();
    const killedAt = Date.now();
    await pollUntil(
      'the standby to lead',
      async () => ((await standby.metric('tamp_operator_leader')) === 1 ? true : undefined),
      (TEST_LEASE.durationSeconds + 10) * 1000,
      50,
    );
    const after = (await lease(namespace))!;
    expect(after.holderIdentity).toBe(standby.identity);
    expect(after.leaseTransitions).toBe((before.leaseTransitions ?? 0) + 1);
    // It waited for the lease to run out: it took it a whole lease duration or more after the
    // killed leader's last renewal (times the Lease records, written on this one machine).
    expect(Date.parse(after.acquireTime!) - Date.parse(before.renewTime!)).toBeGreaterThanOrEqual(
      TEST_LEASE.durationSeconds * 1000,
    );
    console.log(
      `leader killed (SIGKILL): the standby led after ${Date.now() - killedAt} ms (lease ${TEST_LEASE.durationSeconds} s)`,
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
    // A lease far longer than the waits below: a standby that waited for it to run out instead
    // of taking the released lease would time them out.
    const { namespace, leader, standby } = await twoOperators('release', {
      LEASE_DURATION_SECONDS: String(LONG_LEASE_SECONDS),
    });
    const before = (await lease(namespace))!;
    expect(before.leaseDurationSeconds).toBe(LONG_LEASE_SECONDS);
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
      LONG_LEASE_SECONDS * 1000 - 30_000,
      50,
    );
    await stopping;
    const after = (await lease(namespace))!;
    expect(after.holderIdentity).toBe(standby.identity);
    expect(after.leaseTransitions).toBe((before.leaseTransitions ?? 0) + 1);
    // Taken before the leader's lease could have run out: it was released, not expired.
    expect(Date.parse(after.acquireTime!)).toBeLessThan(
      Date.parse(before.renewTime!) + LONG_LEASE_SECONDS * 1000,
    );
    console.log(
      `leader stopped (SIGTERM): the standby led after ${Date.now() - stoppedAt} ms (lease ${LONG_LEASE_SECONDS} s)`,
    );
  });
});
