import type { ObjectStore, Rpc } from '@tamp/kit';
import type { JobWaiters } from '../adapters/job-waiters';

/** What the public routes need from the outside world. */
export interface RouteDependencies {
  rpc: Rpc;
  objectStore: ObjectStore;
  waiters: JobWaiters;
  /** createJob may run an inline job (up to 10 s) before answering. */
  createJobTimeoutMs: number;
}
