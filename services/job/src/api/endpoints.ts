import { EndpointGroup, type Rpc } from '@tamp/kit';
import { jobEndpoints, LIMITS } from '@tamp/proto';
import type { JobAttempts } from '../application/job-attempts';
import type { JobCreation } from '../application/job-creation';
import type { JobReads } from '../application/job-reads';

/** `jobEndpoints` on NATS request/reply: each handler is one call into application/. */
export function serveJobEndpoints(
  rpc: Rpc,
  application: { creation: JobCreation; reads: JobReads; attempts: JobAttempts },
): Promise<EndpointGroup> {
  const { creation, reads, attempts } = application;
  return new EndpointGroup(rpc)
    .serve(jobEndpoints.createJob, (request, { deadline }) =>
      creation.create(request, deadline ?? Date.now() + LIMITS.createJobBudgetMs),
    )
    .serve(jobEndpoints.getJob, ({ accountId, jobId }) => reads.getJob(accountId, jobId))
    .serve(jobEndpoints.getJobEvent, ({ accountId, jobId }) => reads.getJobEvent(accountId, jobId))
    .serve(jobEndpoints.listJobs, (request) => reads.listJobs(request))
    .serve(jobEndpoints.beginAttempt, ({ jobId, attempt, worker }) =>
      attempts.begin(jobId, attempt, worker),
    )
    .serve(jobEndpoints.completeJob, (report) => attempts.complete(report))
    .serve(jobEndpoints.handBackAttempt, ({ jobId, attempt }) => attempts.handBack(jobId, attempt))
    .serve(jobEndpoints.failAttempt, ({ jobId, attempt, error, permanent }) =>
      attempts.failAttempt(jobId, attempt, error, permanent),
    )
    .ready();
}
