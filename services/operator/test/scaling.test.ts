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
    const queuedAt = Date.now();
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

    expect(await world.eventReasons(namespace, 'worker-audio', 2)).toEqual([
      'ScaledDown',
      'ScaledUp',
    ]);
    expect(await operator.metric('tamp_operator_leader')).toBe(1);
    expect(
      await operator.metric('tamp_operator_desired_replicas', { workerpool: 'worker-audio' }),
    ).toBe(1);
    expect(await operator.metric('tamp_operator_reconciles_total', { result: 'scaled' })).toBe(2);
    console.log(
      `WorkerPool during a scale-up and scale-down: up ${scaledAt - queuedAt} ms after the jobs were queued, down ${downAt - emptiedAt} ms after the backlog emptied (window 6 s):\n${timeline.join('\n')}`,
    );
  });

  it('scales from zero and back to zero when minReplicas is 0', async () => {
    const { namespace, kubeconfig } = await world.namespace('zero');
    await world.createDeployment(namespace, 'worker-text', 0);
    await world.applyPool(namespace, 'worker-text', {
      deployment: 'worker-text',
      pipeline: 'text',
      minReplicas: 0,
      maxReplicas: 3,
      targetBacklogPerReplica: 5,
      scaleDownStabilizationSeconds: 1,
      pollIntervalSeconds: 1,
    });
    await world.startOperator({ kubeconfig, namespace });
    await pollUntil(
      'an idle pool at zero',
      async () => {
        const pool = await world.pool(namespace, 'worker-text');
        return pool.status?.backlog === 0 && pool.status.desiredReplicas === 0 ? true : undefined;
      },
      30_000,
    );
    expect(await world.replicas(namespace, 'worker-text')).toBe(0);
    // No pod runs, yet the backlog is JetStream's: one queued job brings a worker up.
    await world.queueJobs('text', 1);
    await pollUntil(
      'scale from zero',
      async () => ((await world.replicas(namespace, 'worker-text')) === 1 ? true : undefined),
      15_000,
    );
    await world.drainJobs('text');
    await pollUntil(
      'scale back to zero',
      async () => ((await world.replicas(namespace, 'worker-text')) === 0 ? true : undefined),
      15_000,
    );
    expect(await world.eventReasons(namespace, 'worker-text', 2)).toEqual([
      'ScaledDown',
      'ScaledUp',
    ]);
  });

  it('puts back replicas someone else changed: the Deployment follows the pool, not the last writer', async () => {
    const { namespace, kubeconfig } = await world.namespace('drift');
    await world.createDeployment(namespace, 'worker-image', 1);
    await world.applyPool(namespace, 'worker-image', {
      deployment: 'worker-image',
      pipeline: 'image',
      minReplicas: 2,
      maxReplicas: 4,
      scaleDownStabilizationSeconds: 0,
      pollIntervalSeconds: 30,
    });
    await world.startOperator({ kubeconfig, namespace });
    await pollUntil(
      'minReplicas applied',
      async () => ((await world.replicas(namespace, 'worker-image')) === 2 ? true : undefined),
      30_000,
    );
    // A helm upgrade or a person: the Deployment's watch event brings it back at once, long
    // before the 30 s poll.
    await world.cluster.kubectl([
      '-n',
      namespace,
      'scale',
      'deployment/worker-image',
      '--replicas=7',
    ]);
    await pollUntil(
      'the replicas put back',
      async () => ((await world.replicas(namespace, 'worker-image')) === 2 ? true : undefined),
      10_000,
    );
    // A spec change is also seen at once: kubectl scale on the pool raises its floor.
    await world.cluster.kubectl([
      '-n',
      namespace,
      'scale',
      'workerpool/worker-image',
      '--replicas=3',
    ]);
    await pollUntil(
      'the new floor applied',
      async () => ((await world.replicas(namespace, 'worker-image')) === 3 ? true : undefined),
      10_000,
    );
  });

  it('changes nothing when the operator restarts in the middle of a stabilization window', async () => {
    const { namespace, kubeconfig } = await world.namespace('restart');
    // Long enough for a restart on a loaded machine (starting the process takes up to ~15 s).
    const window = 30;
    await world.createDeployment(namespace, 'worker-audio', 1);
    await world.applyPool(namespace, 'worker-audio', {
      deployment: 'worker-audio',
      pipeline: 'audio',
      minReplicas: 1,
      maxReplicas: 6,
      targetBacklogPerReplica: 2,
      scaleDownStabilizationSeconds: window,
      pollIntervalSeconds: 1,
    });
    const first = await world.startOperator({ kubeconfig, namespace });
    await world.queueJobs('audio', 8);
    await pollUntil(
      'scale-up to 4',
      async () => ((await world.replicas(namespace, 'worker-audio')) === 4 ? true : undefined),
      15_000,
    );
    await world.drainJobs('audio');
    const held = await pollUntil(
      'the scale-down held',
      async () => {
        const pool = await world.pool(namespace, 'worker-audio');
        return findCondition(pool.status?.conditions, 'Scaling')?.reason === 'ScaleDownStabilizing'
          ? pool
          : undefined;
      },
      10_000,
    );
    const holding = held.status!.recommendations!.find((entry) => entry.replicas === 4)!;
    const windowEnds = Date.parse(holding.time) + window * 1000;

    await first.stop();
    const second = await world.startOperator({ kubeconfig, namespace });
    await pollUntil(
      'the new process to lead',
      async () => ((await second.metric('tamp_operator_leader')) === 1 ? true : undefined),
      10_000,
    );
    // The window kept in status survives the restart: no early scale-down, no second scale-up.
    const afterRestart = await world.pool(namespace, 'worker-audio');
    expect(Date.now(), 'the restart outlasted the window').toBeLessThan(windowEnds);
    expect(afterRestart.status?.lastScaleTime).toBe(held.status?.lastScaleTime);
    expect(afterRestart.status?.recommendations).toEqual(held.status?.recommendations);
    expect(await world.replicas(namespace, 'worker-audio')).toBe(4);
    const downAt = await pollUntil(
      'scale-down when the window ends',
      async () =>
        (await world.replicas(namespace, 'worker-audio')) === 1 ? Date.now() : undefined,
      window * 1000 + 10_000,
      100,
    );
    expect(downAt).toBeGreaterThanOrEqual(windowEnds);
    expect(downAt).toBeLessThan(windowEnds + 5_000);
    expect(await world.eventReasons(namespace, 'worker-audio', 2)).toEqual([
      'ScaledDown',
      'ScaledUp',
    ]);
  });
});
