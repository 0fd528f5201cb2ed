import { hostname } from 'node:os';
import { natsEnv, serviceEnv } from '@tamp/kit';
import { z } from 'zod';

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
