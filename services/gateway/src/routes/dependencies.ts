import type { JobCreationMetrics, ObjectStore, Rpc } from '@tamp/kit';
import type { JobWaiters } from '../adapters/job-waiters';

/** What the public routes need from the outside world. */
export interface RouteDependencies {
  rpc: Rpc;
  objectStore: ObjectStore;
  waiters: JobWaiters;
  /** The whole budget of one creation (see CREATE_JOB_BUDGET_MS). */
  createJobBudgetMs: number;
  /** Creations forwarded at once before new ones are shed (see MAX_CONCURRENT_CREATIONS). */
  maxConcurrentCreations: number;
  /** Jobs created by pipeline and preset (absent in tests that do not read them). */
  jobsCreated?: JobCreationMetrics;
}
