import { describe, expect, it } from 'vitest';
import { findCondition } from './conditions';
import { type BacklogReading, type DeploymentObservation, planReconcile } from './plan';
import type { WorkerPool, WorkerPoolStatus } from './worker-pool';

const now = new Date('2026-01-01T00:10:00.000Z');
const later = (seconds: number) => new Date(now.getTime() + seconds * 1000);

function pool(status?: WorkerPoolStatus, spec: Partial<WorkerPool['spec']> = {}): WorkerPool {
  return {
    metadata: { name: 'worker-audio', namespace: 'tamp', generation: 3 },
    spec: {
      deployment: 'tamp-worker-audio',
      pipeline: 'audio',
      minReplicas: 1,
      maxReplicas: 10,
      targetBacklogPerReplica: 2,
      scaleDownStabilizationSeconds: 60,
      pollIntervalSeconds: 5,
      ...spec,
    },
    status,
  };
}
const deployment = (replicas: number, podReplicas = replicas): DeploymentObservation => ({
  replicas,
  podReplicas,
  selector: 'app=worker',
});
const backlog = (pending: number, ackPending = 0): BacklogReading => ({
  available: true,
  pending,
  ackPending,
});
const unavailable: BacklogReading = {
  available: false,
  reason: 'ConsumerNotFound',
  message: 'consumer worker-audio not found on stream JOBS',
};

describe('planReconcile', () => {
  it('scales up at once from pending plus unacknowledged jobs', () => {
    const plan = planReconcile({
      pool: pool(),
      deployment: deployment(1),
      backlog: backlog(5, 2),
      now,
    });
    expect(plan.scaleTo).toBe(4);
    expect(plan.scaleEvent).toMatchObject({ type: 'Normal', reason: 'ScaledUp' });
    expect(plan.status).toMatchObject({
      observedGeneration: 3,
      backlog: 7,
      replicas: 1,
      desiredReplicas: 4,
      lastScaleTime: now.toISOString(),
      selector: 'app=worker',
    });
    expect(findCondition(plan.status.conditions, 'Ready')).toMatchObject({
      status: 'True',
      observedGeneration: 3,
    });
    expect(findCondition(plan.status.conditions, 'Scaling')).toMatchObject({
      status: 'True',
      reason: 'ScalingUp',
    });
  });

  it('changes nothing when observed again: duplicate events and restarts are harmless', () => {
    const first = planReconcile({
      pool: pool(),
      deployment: deployment(1),
      backlog: backlog(7),
      now,
    });
    const again = planReconcile({
      pool: pool(first.status),
      deployment: deployment(4),
      backlog: backlog(7),
      now: later(1),
    });
    expect(again.scaleTo).toBeUndefined();
    expect(again.events).toEqual([]);
    expect(again.status.lastScaleTime).toBe(now.toISOString());
    const third = planReconcile({
      pool: pool(again.status),
      deployment: deployment(4),
      backlog: backlog(7),
      now: later(1),
    });
    expect(third.status).toEqual(again.status);
  });

  it('holds a scale-down for the window kept in status, then scales down', () => {
    const up = planReconcile({ pool: pool(), deployment: deployment(1), backlog: backlog(8), now });
    const held = planReconcile({
      pool: pool(up.status),
      deployment: deployment(4),
      backlog: backlog(0),
      now: later(30),
    });
    expect(held.scaleTo).toBeUndefined();
    expect(held.status.desiredReplicas).toBe(4);
    expect(findCondition(held.status.conditions, 'Scaling')).toMatchObject({
      status: 'False',
      reason: 'ScaleDownStabilizing',
    });
    const stillHeld = planReconcile({
      pool: pool(held.status),
      deployment: deployment(4),
      backlog: backlog(0),
      now: later(89),
    });
    expect(stillHeld.scaleTo).toBeUndefined();
    expect(stillHeld.status).toEqual(held.status);
    const down = planReconcile({
      pool: pool(stillHeld.status),
      deployment: deployment(4),
      backlog: backlog(0),
      now: later(91),
    });
    expect(down.scaleTo).toBe(1);
    expect(down.scaleEvent).toMatchObject({ reason: 'ScaledDown' });
  });

  it('scales from zero and to zero when minReplicas is 0', () => {
    const zero = { minReplicas: 0, scaleDownStabilizationSeconds: 0 };
    const up = planReconcile({
      pool: pool(undefined, zero),
      deployment: deployment(0),
      backlog: backlog(1),
      now,
    });
    expect(up.scaleTo).toBe(1);
    const down = planReconcile({
      pool: pool(up.status, zero),
      deployment: deployment(1),
      backlog: backlog(0),
      now: later(1),
    });
    expect(down.scaleTo).toBe(0);
  });

  it('keeps the replicas when the backlog cannot be read, and says why once', () => {
    const previous = planReconcile({
      pool: pool(),
      deployment: deployment(3),
      backlog: backlog(6),
      now,
    }).status;
    const plan = planReconcile({
      pool: pool(previous),
      deployment: deployment(3),
      backlog: unavailable,
      now: later(5),
    });
    expect(plan.scaleTo).toBeUndefined();
    expect(plan.status.backlog).toBeUndefined();
    expect(plan.status.desiredReplicas).toBe(3);
    expect(findCondition(plan.status.conditions, 'BacklogUnavailable')).toMatchObject({
      status: 'True',
      reason: 'ConsumerNotFound',
    });
    expect(findCondition(plan.status.conditions, 'Ready')).toMatchObject({ status: 'False' });
    expect(plan.events).toEqual([
      expect.objectContaining({ type: 'Warning', reason: 'ConsumerNotFound' }),
    ]);
    const again = planReconcile({
      pool: pool(plan.status),
      deployment: deployment(3),
      backlog: unavailable,
      now: later(10),
    });
    expect(again.events).toEqual([]);
    const recovered = planReconcile({
      pool: pool(again.status),
      deployment: deployment(3),
      backlog: backlog(6),
      now: later(15),
    });
    expect(recovered.events).toEqual([
      expect.objectContaining({ type: 'Normal', reason: 'BacklogRead' }),
    ]);
  });

  it('without a backlog still brings the replicas within min and max', () => {
    const plan = planReconcile({
      pool: pool(undefined, { maxReplicas: 2 }),
      deployment: deployment(5),
      backlog: unavailable,
      now,
    });
    expect(plan.scaleTo).toBe(2);
  });

  it('reports a missing Deployment instead of acting', () => {
    const plan = planReconcile({ pool: pool(), deployment: undefined, backlog: backlog(9), now });
    expect(plan.scaleTo).toBeUndefined();
    expect(plan.status.backlog).toBe(9);
    expect(findCondition(plan.status.conditions, 'DeploymentMissing')).toMatchObject({
      status: 'True',
      reason: 'DeploymentNotFound',
    });
    expect(findCondition(plan.status.conditions, 'Ready')).toMatchObject({ status: 'False' });
    expect(plan.events).toEqual([
      expect.objectContaining({ type: 'Warning', reason: 'DeploymentNotFound' }),
    ]);
  });

  it('is Scaling while the pods have not caught up', () => {
    const plan = planReconcile({
      pool: pool(),
      deployment: deployment(2, 1),
      backlog: backlog(4),
      now,
    });
    expect(plan.scaleTo).toBeUndefined();
    expect(findCondition(plan.status.conditions, 'Scaling')).toMatchObject({
      status: 'True',
      reason: 'WaitingForPods',
    });
  });
});
