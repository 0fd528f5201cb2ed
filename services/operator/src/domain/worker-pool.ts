import type { Pipeline } from '@tamp/proto';

/** The WorkerPool API (k8s/crds/workerpools.tamp.dev.yaml), as the operator reads and writes it. */
export const WORKER_POOL_API = {
  group: 'tamp.dev',
  version: 'v1alpha1',
  plural: 'workerpools',
  kind: 'WorkerPool',
} as const;

/** Defaults and validation come from the CRD's schema: the API server applies both. */
export interface WorkerPoolSpec {
  deployment: string;
  pipeline: Pipeline;
  minReplicas: number;
  maxReplicas: number;
  targetBacklogPerReplica: number;
  scaleDownStabilizationSeconds: number;
  pollIntervalSeconds: number;
}

export type ConditionStatus = 'True' | 'False' | 'Unknown';

/** A condition as the Kubernetes API conventions define it (metav1.Condition). */
export interface Condition {
  type: ConditionType;
  status: ConditionStatus;
  observedGeneration: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

export type ConditionType = 'Ready' | 'Scaling' | 'BacklogUnavailable' | 'DeploymentMissing';

export interface Recommendation {
  replicas: number;
  time: string;
}

export interface WorkerPoolStatus {
  observedGeneration?: number;
  backlog?: number;
  replicas?: number;
  desiredReplicas?: number;
  lastScaleTime?: string;
  selector?: string;
  recommendations?: Recommendation[];
  conditions?: Condition[];
}

export interface WorkerPool {
  metadata: {
    name: string;
    namespace: string;
    generation: number;
    uid?: string;
    resourceVersion?: string;
  };
  spec: WorkerPoolSpec;
  status?: WorkerPoolStatus;
}
