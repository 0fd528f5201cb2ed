import { hostname } from 'node:os';
import { natsEnv, serviceEnv } from '@tamp/kit';
import { z } from 'zod';
import type { OperatorOptions } from './application/operator';

const seconds = z.coerce.number().int().positive();
const milliseconds = z.coerce.number().int().positive();

export const configSchema = z
  .object({
    ...serviceEnv,
    ...natsEnv,
    /**
     * A kubeconfig file; without it the operator uses its pod's service account when it runs
     * in a cluster, and otherwise (the local stack) has nothing to scale and idles.
     */
    KUBECONFIG: z.string().min(1).optional(),
    /**
     * Set by Kubernetes in every pod, not by hand: there, without KUBECONFIG, the operator uses
     * its pod's service account.
     */
    KUBERNETES_SERVICE_HOST: z.string().optional(),
    /** Namespace whose WorkerPools are reconciled; default: the kubeconfig's or the pod's. */
    WATCH_NAMESPACE: z.string().min(1).optional(),
    /** Name of the Lease the operator replicas share for leader election. */
    LEASE_NAME: z.string().min(1).default('tamp-operator'),
    /** Unique per process; two candidates with one identity would both think they lead. */
    LEASE_IDENTITY: z
      .string()
      .min(1)
      .default(() => `${hostname()}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`),
    /** How long a lease is valid after its last renewal: the fail-over time's upper bound. */
    LEASE_DURATION_SECONDS: seconds.default(15),
    /** A leader that could not renew for this long stops acting (before its lease ends). */
    LEASE_RENEW_DEADLINE_MS: milliseconds.default(10_000),
    /** Time between two tries to take or renew the lease. */
    LEASE_RETRY_PERIOD_MS: milliseconds.default(2_000),
    /** WorkerPools reconciled at the same time (one pool is never reconciled twice at once). */
    RECONCILE_CONCURRENCY: z.coerce.number().int().min(1).max(32).default(4),
    /** Bound on every call to the Kubernetes API and to JetStream. */
    REQUEST_TIMEOUT_MS: milliseconds.default(10_000),
  })
  .refine((config) => config.LEASE_RENEW_DEADLINE_MS < config.LEASE_DURATION_SECONDS * 1000, {
    message: 'must be shorter than LEASE_DURATION_SECONDS, or two leaders could act at once',
    path: ['LEASE_RENEW_DEADLINE_MS'],
  })
  .refine((config) => config.LEASE_RETRY_PERIOD_MS < config.LEASE_RENEW_DEADLINE_MS, {
    message: 'must be shorter than LEASE_RENEW_DEADLINE_MS, or a leader could never renew in time',
    path: ['LEASE_RETRY_PERIOD_MS'],
  });
export type Config = z.output<typeof configSchema>;

export interface OperatorSettings {
  /** A kubeconfig file; undefined: the pod's service account, if `inCluster`. */
  kubeconfig: string | undefined;
  /** Whether the process runs in a Kubernetes pod. */
  inCluster: boolean;
  /** Namespace whose WorkerPools are reconciled; undefined: the kubeconfig's context's. */
  namespace: string | undefined;
  /** Leader election among the operator replicas, over the Lease LEASE_NAME. */
  election: OperatorOptions['election'];
  /** WorkerPools reconciled at the same time. */
  reconcileConcurrency: number;
  /** Bound on every call to the Kubernetes API and to JetStream. */
  requestTimeoutMs: number;
}

export function operatorSettingsFrom(config: Config): OperatorSettings {
  return {
    kubeconfig: config.KUBECONFIG,
    inCluster: config.KUBERNETES_SERVICE_HOST !== undefined,
    namespace: config.WATCH_NAMESPACE,
    election: {
      leaseName: config.LEASE_NAME,
      identity: config.LEASE_IDENTITY,
      leaseDurationSeconds: config.LEASE_DURATION_SECONDS,
      renewDeadlineMs: config.LEASE_RENEW_DEADLINE_MS,
      retryPeriodMs: config.LEASE_RETRY_PERIOD_MS,
    },
    reconcileConcurrency: config.RECONCILE_CONCURRENCY,
    requestTimeoutMs: config.REQUEST_TIMEOUT_MS,
  };
}
