import { type JobEvent, type JobWorkMessage, jobWorkMessage } from '@tamp/proto';
import type { JobDocument } from './job';

/** The EVENTS body for a terminal job (`job.completed` or `job.failed`). */
export function jobEventOf(job: JobDocument): JobEvent {
  if (job.status !== 'completed' && job.status !== 'failed') {
    throw new Error(`job ${job._id} is ${job.status}, not terminal`);
  }
  const completed = job.status === 'completed';
  return {
    event: completed ? 'job.completed' : 'job.failed',
    jobId: job._id,
    accountId: job.accountId,
    pipeline: job.pipeline,
    status: job.status,
    inline: job.inline,
    webhookUrl: job.webhookUrl,
    result:
      completed && job.result !== null
        ? { outputKey: job.result.outputKey, metrics: job.result.metrics }
        : null,
    error: completed ? null : (job.error ?? 'The job failed'),
    usage: completed ? job.usage : null,
    createdAt: job.createdAt.toISOString(),
    completedAt: (job.completedAt ?? job.updatedAt).toISOString(),
  };
}

/** The work message of a job, for JOBS, the inline subjects and `beginAttempt`. */
export function jobWorkOf(job: JobDocument): JobWorkMessage {
  return jobWorkMessage.parse({
    jobId: job._id,
    accountId: job.accountId,
    createdAt: job.createdAt.toISOString(),
    input: job.input,
    pipeline: job.pipeline,
    operations: job.operations,
  });
}
