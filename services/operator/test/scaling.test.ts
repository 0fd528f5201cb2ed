import { describe, expect, it } from 'vitest';
import { findCondition } from '../src/domain/conditions';
import type { WorkerPool } from '../src/domain/worker-pool';
import {
  type InProcessOperator,
  moreReconciles,
  pollUntil,
  TestClock,
  useOperatorWorld,
} from './harness';

/**
 * Stabilization windows here are long (10 minutes) and never waited out: the operators that
 * hold them run in process with a TestClock, which the test moves to just before a window's end
 * and then to its end (`passWindow`).
 */
const WINDOW_SECONDS = 600;

describe('the operator scales a real Deployment from a real JetStream backlog', () => {
  const world = useOperatorWorld();

  /** When the window holding `replicas` ends: from the recommendation kept in status. */
  const windowEnd = (pool: WorkerPool, replicas: number, windowSeconds = WINDOW_SECONDS) => {
    const holding = pool.status?.recommendations?.find((entry) => entry.replicas === replicas);
    if (holding === undefined) throw new Error(`no recommendation of ${replicas} in status`);
    return Date.parse(holding.time) + windowSeconds * 1000;
  };

  /**
   * Resolves once the operator finished a reconcile begun after this call, so planned at what
   * the clock reads now. One pool is reconciled by one worker at a time: of the next two to
   * finish, the first may have read the clock before this call, the second began after it.
   */
  const nextReconcile = (operator: InProcessOperator) => moreReconciles(operator, 2, 15_000);

  /**
   * Moves `clock` to a second before `endsAt` (the operator looks again and still holds
   * `held` replicas), then to `endsAt`; resolves once the Deployment is scaled to `to`.
   */
  const passWindow = async (options: {
    namespace: string;
    pool: string;
    operator: InProcessOperator;
    clock: TestClock;
    endsAt: number;
    held: number;
    to: number;
  }) => {
    const { namespace, pool, operator, clock, endsAt } = options;
    clock.setTo(endsAt - 1_000);
    await nextReconcile(operator);
    expect(await world.replicas(namespace, pool), 'a second before the window ends').toBe(
      options.held,
    );
    const before = await world.pool(namespace, pool);
    expect(findCondition(before.status?.conditions, 'Scaling')?.reason).toBe(
      'ScaleDownStabilizing',
    );
    clock.setTo(endsAt);
    await pollUntil(
      `scale-down to ${options.to} once the window ended`,
      async () => ((await world.replicas(namespace, pool)) === options.to ? true : undefined),
      15_000,
      100,
    );
    const after = await world.pool(namespace, pool);
    // Planned at the clock's reading once set to the window's end: not before it.
    expect(after.status?.lastScaleTime).toBe(new Date(endsAt).toISOString());
    return after;
  };

  it('scales up at once, then back down after the stabilization window', async () => {
    const { namespace, kubeconfig } = await world.namespace('scale');
    await world.createDeployment(namespace, 'worker-audio', 1);
    await world.applyPool(namespace, 'worker-audio', {
      deployment: 'worker-audio',
      pipeline: 'audio',
      minReplicas: 1,
      maxReplicas: 5,
      targetBacklogPerReplica: 2,
      scaleDownStabilizationSeconds: WINDOW_SECONDS,
      pollIntervalSeconds: 1,
    });
    const clock = new TestClock();
    const operator = await world.startOperatorInProcess({
      kubeconfig,
      namespace,
      clock: clock.now,
    });
    const timeline: string[] = [];
    const started = clock.now().getTime();
    const snapshot = async () => {
      const rows = (await world.table(namespace)).trim().split('\n');
      const second = ((clock.now().getTime() - started) / 1000).toFixed(1).padStart(5);
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

    const drainedFrom = clock.now().getTime();
    await world.drainJobs('audio');
    // Held for the window: 4 replicas, and the window counted from when the backlog emptied.
    await pollUntil(
      'the empty backlog to be seen',
      async () =>
        (await world.pool(namespace, 'worker-audio')).status?.backlog === 0 ? true : undefined,
      10_000,
    );
    await snapshot();
    const held = await world.pool(namespace, 'worker-audio');
    const windowEnds = windowEnd(held, 4);
    expect(windowEnds - WINDOW_SECONDS * 1000).toBeGreaterThanOrEqual(drainedFrom);
    expect(findCondition(held.status?.conditions, 'Scaling')).toMatchObject({
      reason: 'ScaleDownStabilizing',
      message: expect.stringContaining(`holding 4 until ${new Date(windowEnds).toISOString()}`),
    });
    expect(await world.replicas(namespace, 'worker-audio')).toBe(4);
    // Not before the window's end, and at the first look after it.
    await passWindow({
      namespace,
      pool: 'worker-audio',
      operator,
      clock,
      endsAt: windowEnds,
      held: 4,
      to: 1,
    });
    await snapshot();
    await pollUntil(
      'the pods of 1 replica',
      async () =>
        (await world.pool(namespace, 'worker-audio')).status?.replicas === 1 ? true : undefined,
      30_000,
    );
    await snapshot();

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
      `WorkerPool during a scale-up and scale-down: up ${scaledAt - queuedAt} ms after the jobs were queued, down at the first look once the ${WINDOW_SECONDS} s window had ended (t below is the operator's test clock, set to a second before the window's end and then to its end):\n${timeline.join('\n')}`,
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
      scaleDownStabilizationSeconds: WINDOW_SECONDS,
      pollIntervalSeconds: 1,
    });
    const clock = new TestClock();
    const operator = await world.startOperatorInProcess({
      kubeconfig,
      namespace,
      clock: clock.now,
    });
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
    const held = await pollUntil(
      'the scale-down to zero held',
      async () => {
        const pool = await world.pool(namespace, 'worker-text');
        return findCondition(pool.status?.conditions, 'Scaling')?.reason === 'ScaleDownStabilizing'
          ? pool
          : undefined;
      },
      15_000,
    );
    await passWindow({
      namespace,
      pool: 'worker-text',
      operator,
      clock,
      endsAt: windowEnd(held, 1),
      held: 1,
      to: 0,
    });
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
    await world.createDeployment(namespace, 'worker-audio', 1);
    await world.applyPool(namespace, 'worker-audio', {
      deployment: 'worker-audio',
      pipeline: 'audio',
      minReplicas: 1,
      maxReplicas: 6,
      targetBacklogPerReplica: 2,
      scaleDownStabilizationSeconds: WINDOW_SECONDS,
      pollIntervalSeconds: 1,
    });
    // Both operators read one clock; the second starts with nothing but what the first wrote.
    const clock = new TestClock();
    const first = await world.startOperatorInProcess({ kubeconfig, namespace, clock: clock.now });
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
    const windowEnds = windowEnd(held, 4);

    await first.stop();
    const second = await world.startOperatorInProcess({ kubeconfig, namespace, clock: clock.now });
    await pollUntil(
      'the new operator to lead',
      async () => ((await second.metric('tamp_operator_leader')) === 1 ? true : undefined),
      10_000,
    );
    // The window kept in status survives the restart: once the new operator has looked at the
    // pool, no early scale-down, no second scale-up, the same history.
    await nextReconcile(second);
    const afterRestart = await world.pool(namespace, 'worker-audio');
    expect(clock.now().getTime(), 'the restart outlasted the window').toBeLessThan(windowEnds);
    expect(afterRestart.status?.lastScaleTime).toBe(held.status?.lastScaleTime);
    expect(afterRestart.status?.recommendations).toEqual(held.status?.recommendations);
    expect(await world.replicas(namespace, 'worker-audio')).toBe(4);
    // And the window it keeps is the one the first operator began.
    await passWindow({
      namespace,
      pool: 'worker-audio',
      operator: second,
      clock,
      endsAt: windowEnds,
      held: 4,
      to: 1,
    });
    expect(await world.eventReasons(namespace, 'worker-audio', 2)).toEqual([
      'ScaledDown',
      'ScaledUp',
    ]);
  });
});
