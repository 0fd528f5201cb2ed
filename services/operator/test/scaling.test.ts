import { describe, expect, it } from 'vitest';
import { findCondition } from '../src/domain/conditions';
import { pollUntil, useOperatorWorld } from './harness';

describe('the operator scales a real Deployment from a real JetStream backlog', () => {
  const world = useOperatorWorld();

  it('scales up at once, then back down after the stabilization window', async () => {
    const { namespace, kubeconfig } = await world.namespace('scale');
    await world.createDeployment(namespace, 'worker-audio', 1);
    await world.applyPool(namespace, 'worker-audio', {
      deployment: 'worker-audio',
      pipeline: 'audio',
      minReplicas: 1,
      maxReplicas: 5,
      targetBacklogPerReplica: 2,
      scaleDownStabilizationSeconds: 6,
      pollIntervalSeconds: 1,
    });
    const operator = await world.startOperator({ kubeconfig, namespace });
    const timeline: string[] = [];
    const started = Date.now();
    const snapshot = async () => {
      const rows = (await world.table(namespace)).trim().split('\n');
      const second = ((Date.now() - started) / 1000).toFixed(1).padStart(5);
      if (timeline.length === 0) timeline.push(`  t(s)  ${rows[0]}`);
      timeline.push(`${second}  ${rows[1]}`);
    };

    await pollUntil(
      'the pool to follow an empty backlog',
      async () =>
        (await world.pool(namespace, 'worker-audio')).status?.backlog === 0 ? true : undefined,
      30_000,
    );
    await snapshot();
    await world.queueJobs('audio', 7);
    await world.startJobs('audio', 2); // in progress: still backlog
    const scaledAt = await pollUntil(
      'scale-up to ceil(7 / 2) = 4',
      async () =>
        (await world.replicas(namespace, 'worker-audio')) === 4 ? Date.now() : undefined,
      15_000,
      100,
    );
    await snapshot();
    const up = await world.pool(namespace, 'worker-audio');
    expect(up.status).toMatchObject({ backlog: 7, desiredReplicas: 4 });
    expect(findCondition(up.status?.conditions, 'Ready')).toMatchObject({
      status: 'True',
      observedGeneration: up.metadata.generation,
    });
    await pollUntil(
      'the pods of 4 replicas',
      async () =>
        (await world.pool(namespace, 'worker-audio')).status?.replicas === 4 ? true : undefined,
      30_000,
    );
    await snapshot();

    await world.drainJobs('audio');
    const emptiedAt = Date.now();
    // Held for the window: still 4 replicas well into it.
    await pollUntil(
      'the empty backlog to be seen',
      async () =>
        (await world.pool(namespace, 'worker-audio')).status?.backlog === 0 ? true : undefined,
      10_000,
    );
    await snapshot();
    const held = await world.pool(namespace, 'worker-audio');
    expect(findCondition(held.status?.conditions, 'Scaling')?.reason).toBe('ScaleDownStabilizing');
    expect(await world.replicas(namespace, 'worker-audio')).toBe(4);
    const downAt = await pollUntil(
      'scale-down to minReplicas after the window',
      async () =>
        (await world.replicas(namespace, 'worker-audio')) === 1 ? Date.now() : undefined,
      30_000,
      100,
    );
    await snapshot();
    await pollUntil(
      'the pods of 1 replica',
      async () =>
        (await world.pool(namespace, 'worker-audio')).status?.replicas === 1 ? true : undefined,
      30_000,
    );
    await snapshot();
    // Not before the window, and within a poll or two after it.
    expect(downAt - emptiedAt).toBeGreaterThanOrEqual(6_000);
    expect(downAt - emptiedAt).toBeLessThan(6_000 + 5_000);

    const events = await world.events(namespace, 'worker-audio');
    expect(events.filter((event) => event.reason === 'ScaledUp')).toHaveLength(1);
    expect(events.filter((event) => event.reason === 'ScaledDown')).toHaveLength(1);
    expect(await operator.metric('tamp_operator_leader')).toBe(1);
    expect(
      await operator.metric('tamp_operator_desired_replicas', { workerpool: 'worker-audio' }),
    ).toBe(1);
    expect(await operator.metric('tamp_operator_reconciles_total', { result: 'scaled' })).toBe(2);
    console.log(
      `WorkerPool during a scale-up and scale-down (scale-up ${scaledAt - started} ms after start of timeline; down ${downAt - emptiedAt} ms after the backlog emptied, window 6 s):\n${timeline.join('\n')}`,
    );
  });
});
