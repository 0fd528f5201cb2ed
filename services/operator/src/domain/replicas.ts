import type { Recommendation, WorkerPoolSpec } from './worker-pool';

type Bounds = Pick<WorkerPoolSpec, 'minReplicas' | 'maxReplicas'>;

export function clampReplicas(replicas: number, bounds: Bounds): number {
  return Math.min(bounds.maxReplicas, Math.max(bounds.minReplicas, replicas));
}

/** desired = clamp(ceil(backlog / target), min, max): the count the backlog alone asks for. */
export function recommendReplicas(
  backlog: number,
  spec: Pick<WorkerPoolSpec, 'minReplicas' | 'maxReplicas' | 'targetBacklogPerReplica'>,
): number {
  return clampReplicas(Math.ceil(backlog / spec.targetBacklogPerReplica), spec);
}

/**
 * Scale-up at once, scale-down to no less than the highest count recommended during the window
 * (the HPA's stabilization), with the history kept in the WorkerPool's status so a restart or a
 * new leader keeps the window.
 *
 * Only recommendations higher than every later one can still be the maximum, so the history is
 * a short decreasing list (a sliding-window maximum). The last entry is the current
 * recommendation and carries the time since when it has been made; every earlier entry carries
 * the time it stopped being made, taken as the moment the next, lower one was first seen (at
 * most one poll late, so the window is never shortened). The history therefore changes only
 * when the recommendation does: a pool at rest writes nothing, however often it is reconciled.
 */
export function stabilize(
  history: readonly Recommendation[],
  recommendation: number,
  now: Date,
  windowSeconds: number,
): { replicas: number; history: Recommendation[] } {
  const next = nextHistory(history, recommendation, now);
  const windowStart = now.getTime() - windowSeconds * 1000;
  const live = next.filter(
    (entry, index) => index === next.length - 1 || Date.parse(entry.time) > windowStart,
  );
  return { replicas: live[0]!.replicas, history: live };
}

function nextHistory(
  history: readonly Recommendation[],
  recommendation: number,
  now: Date,
): Recommendation[] {
  const current = history.at(-1);
  if (current?.replicas === recommendation) return [...history];
  const time = now.toISOString();
  const ended =
    current !== undefined && current.replicas > recommendation
      ? [...history.slice(0, -1), { replicas: current.replicas, time }]
      : history.filter((entry) => entry.replicas > recommendation);
  return [...ended, { replicas: recommendation, time }];
}

/** When the recommendation holding `replicas` leaves the window: the next scale-down. */
export function stabilizedUntil(
  history: readonly Recommendation[],
  replicas: number,
  windowSeconds: number,
): Date | undefined {
  const holding = history.find((entry) => entry.replicas === replicas);
  return holding === undefined
    ? undefined
    : new Date(Date.parse(holding.time) + windowSeconds * 1000);
}
