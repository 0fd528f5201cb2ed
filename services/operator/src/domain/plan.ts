import { becameTrue, type ConditionUpdate, findCondition, setCondition } from './conditions';
import { clampReplicas, recommendReplicas, stabilize, stabilizedUntil } from './replicas';
import type { Condition, WorkerPool, WorkerPoolStatus } from './worker-pool';

/** The worker Deployment as the operator sees it. */
export interface DeploymentObservation {
  /** spec.replicas: what the Deployment is asked to run. */
  replicas: number;
  /** status.replicas: pods that exist. */
  podReplicas: number;
  /** The label selector, serialized (`app=x,tier=y`), for the scale subresource. */
  selector: string;
}

export type BacklogProblem = 'ConsumerNotFound' | 'ConsumerUnreadable' | 'NatsUnavailable';

export type BacklogReading =
  | { available: true; pending: number; ackPending: number }
  | { available: false; reason: BacklogProblem; message: string };

export interface Observation {
  pool: WorkerPool;
  deployment: DeploymentObservation | undefined;
  backlog: BacklogReading;
  now: Date;
}

export interface PoolEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  action: string;
  note: string;
}

export interface Plan {
  /** Set when the Deployment's replica count must change. */
  scaleTo?: number;
  /** Recorded only once the scale succeeded. */
  scaleEvent?: PoolEvent;
  status: WorkerPoolStatus;
  /** Condition transitions worth an Event. */
  events: PoolEvent[];
}

/**
 * What to do about one WorkerPool, from what is observed now and what its status recorded
 * (level-based: the same observation always gives the same plan, so a restart, a missed event
 * or a duplicate one changes nothing). A backlog that cannot be read never moves the replicas
 * beyond keeping them within minReplicas and maxReplicas.
 */
export function planReconcile(observation: Observation): Plan {
  const { pool, deployment, backlog, now } = observation;
  const previous = pool.status ?? {};
  const generation = pool.metadata.generation;
  const backlogTotal = backlog.available ? backlog.pending + backlog.ackPending : undefined;
  let conditions = previous.conditions ?? [];
  const set = (update: Omit<ConditionUpdate, 'observedGeneration'>) => {
    conditions = setCondition(conditions, { ...update, observedGeneration: generation }, now);
  };

  set(backlogCondition(pool, backlog));

  if (deployment === undefined) {
    const message = `Deployment ${pool.spec.deployment} not found in namespace ${pool.metadata.namespace}`;
    set({ type: 'DeploymentMissing', status: 'True', reason: 'DeploymentNotFound', message });
    set({ type: 'Ready', status: 'False', reason: 'DeploymentMissing', message });
    set({ type: 'Scaling', status: 'False', reason: 'DeploymentMissing', message });
    const status: WorkerPoolStatus = {
      ...previous,
      observedGeneration: generation,
      backlog: backlogTotal,
      replicas: undefined,
      selector: undefined,
      conditions,
    };
    return { status, events: transitionEvents(previous.conditions, conditions) };
  }
  set({
    type: 'DeploymentMissing',
    status: 'False',
    reason: 'DeploymentFound',
    message: `Deployment ${pool.spec.deployment} found`,
  });

  const decision = backlog.available
    ? followBacklog(pool, deployment, backlog.pending + backlog.ackPending, now)
    : holdReplicas(pool, deployment, backlog);
  set(decision.ready);
  set(decision.scaling);

  const scaleTo = decision.replicas !== deployment.replicas ? decision.replicas : undefined;
  const status: WorkerPoolStatus = {
    observedGeneration: generation,
    backlog: backlogTotal,
    replicas: deployment.podReplicas,
    desiredReplicas: decision.replicas,
    lastScaleTime: scaleTo === undefined ? previous.lastScaleTime : now.toISOString(),
    selector: deployment.selector,
    recommendations: decision.recommendations,
    conditions,
  };
  return {
    scaleTo,
    scaleEvent: scaleTo === undefined ? undefined : scaleEvent(pool, deployment, scaleTo, backlog),
    status,
    events: transitionEvents(previous.conditions, conditions),
  };
}

type ConditionFields = Omit<ConditionUpdate, 'observedGeneration'>;

interface Decision {
  replicas: number;
  recommendations: WorkerPoolStatus['recommendations'];
  ready: ConditionFields;
  scaling: ConditionFields;
}

function backlogCondition(pool: WorkerPool, backlog: BacklogReading): ConditionFields {
  if (!backlog.available) {
    return {
      type: 'BacklogUnavailable',
      status: 'True',
      reason: backlog.reason,
      message: backlog.message,
    };
  }
  return {
    type: 'BacklogUnavailable',
    status: 'False',
    reason: 'BacklogRead',
    message: `consumer worker-${pool.spec.pipeline}: ${backlog.pending} pending, ${backlog.ackPending} in progress`,
  };
}

/**
 * Without a backlog the replicas stay as they are (KEDA's scaler went to maxReplicas here),
 * only brought within minReplicas and maxReplicas, which needs no backlog to know.
 */
function holdReplicas(
  pool: WorkerPool,
  deployment: DeploymentObservation,
  backlog: Extract<BacklogReading, { available: false }>,
): Decision {
  const replicas = clampReplicas(deployment.replicas, pool.spec);
  const message = `backlog unavailable (${backlog.reason}); keeping ${replicas} replicas`;
  return {
    replicas,
    recommendations: pool.status?.recommendations,
    ready: { type: 'Ready', status: 'False', reason: 'BacklogUnavailable', message },
    scaling:
      replicas === deployment.replicas
        ? { type: 'Scaling', status: 'False', reason: 'BacklogUnavailable', message }
        : {
            type: 'Scaling',
            status: 'True',
            reason: 'OutsideReplicaBounds',
            message: `scaling from ${deployment.replicas} to ${replicas} to stay within minReplicas and maxReplicas`,
          },
  };
}

function followBacklog(
  pool: WorkerPool,
  deployment: DeploymentObservation,
  backlog: number,
  now: Date,
): Decision {
  const { spec } = pool;
  const recommended = recommendReplicas(backlog, spec);
  const stabilized = stabilize(
    pool.status?.recommendations ?? [],
    recommended,
    now,
    spec.scaleDownStabilizationSeconds,
  );
  const replicas = stabilized.replicas;
  const perReplica = `a backlog of ${backlog} (${spec.targetBacklogPerReplica} per replica)`;
  return {
    replicas,
    recommendations: stabilized.history,
    ready: {
      type: 'Ready',
      status: 'True',
      reason: 'FollowingBacklog',
      message: `${replicas} replicas for ${perReplica}`,
    },
    scaling: scalingCondition(pool, deployment, replicas, recommended, stabilized.history),
  };
}

function scalingCondition(
  pool: WorkerPool,
  deployment: DeploymentObservation,
  replicas: number,
  recommended: number,
  history: NonNullable<WorkerPoolStatus['recommendations']>,
): ConditionFields {
  if (replicas !== deployment.replicas) {
    const up = replicas > deployment.replicas;
    return {
      type: 'Scaling',
      status: 'True',
      reason: up ? 'ScalingUp' : 'ScalingDown',
      message: `scaling from ${deployment.replicas} to ${replicas} replicas`,
    };
  }
  if (deployment.podReplicas !== replicas) {
    return {
      type: 'Scaling',
      status: 'True',
      reason: 'WaitingForPods',
      message: `${deployment.podReplicas} of ${replicas} pods exist`,
    };
  }
  if (recommended < replicas) {
    const until = stabilizedUntil(history, replicas, pool.spec.scaleDownStabilizationSeconds);
    return {
      type: 'Scaling',
      status: 'False',
      reason: 'ScaleDownStabilizing',
      message: `the backlog asks for ${recommended}; holding ${replicas} until ${until?.toISOString()}`,
    };
  }
  const limited = recommended === pool.spec.maxReplicas && replicas === pool.spec.maxReplicas;
  return {
    type: 'Scaling',
    status: 'False',
    reason: limited ? 'AtMaxReplicas' : 'Stable',
    message: `${replicas} replicas`,
  };
}

function scaleEvent(
  pool: WorkerPool,
  deployment: DeploymentObservation,
  replicas: number,
  backlog: BacklogReading,
): PoolEvent {
  const up = replicas > deployment.replicas;
  const why = backlog.available
    ? `backlog ${backlog.pending + backlog.ackPending}, ${pool.spec.targetBacklogPerReplica} per replica`
    : 'within minReplicas and maxReplicas';
  return {
    type: 'Normal',
    reason: up ? 'ScaledUp' : 'ScaledDown',
    action: 'Scale',
    note: `Scaled Deployment ${pool.spec.deployment} from ${deployment.replicas} to ${replicas} replicas (${why})`,
  };
}

/** Problems are announced when they begin and when they end, never on every reconcile. */
function transitionEvents(
  before: readonly Condition[] | undefined,
  after: readonly Condition[],
): PoolEvent[] {
  const events: PoolEvent[] = [];
  for (const type of ['DeploymentMissing', 'BacklogUnavailable'] as const) {
    const condition = findCondition(after, type);
    if (condition === undefined) continue;
    if (becameTrue(before, after, type)) {
      events.push({
        type: 'Warning',
        reason: condition.reason,
        action: 'Observe',
        note: condition.message,
      });
    } else if (condition.status === 'False' && findCondition(before, type)?.status === 'True') {
      events.push({
        type: 'Normal',
        reason: condition.reason,
        action: 'Observe',
        note: condition.message,
      });
    }
  }
  return events;
}
