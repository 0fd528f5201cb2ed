import type { ObjectStore, Rpc } from '@tamp/kit';
import {
  type AccountLimits,
  jobEndpoints,
  newId,
  type PublicJob,
  ServiceError,
  storageKeys,
} from '@tamp/proto';
import {
  audioCreateJob,
  type CreateJobContext,
  type CreateJobRequest,
  imageCreateJob,
  textCreateJob,
} from '../domain/create-job';
import { planInlineText } from '../domain/inline-text';
import type { AudioJobBody, ImageJobBody, TextJobBody } from '../domain/job-requests';

export type JobSubmission =
  | { pipeline: 'audio'; body: AudioJobBody }
  | { pipeline: 'image'; body: ImageJobBody }
  | { pipeline: 'text'; body: TextJobBody };

export interface JobSubmissionDependencies {
  rpc: Rpc;
  objectStore: ObjectStore;
  /** The whole budget of one creation (CREATE_JOB_BUDGET_MS). */
  budgetMs: number;
}

/**
 * POST /v1/<pipeline>: mints the job id, stores text too large to cross NATS under the job's
 * input key, and asks the job service to create the job, all within one budget whose deadline
 * travels with the call, so every internal step stops in time for a 503 to reach the client.
 */
export async function submitJob(
  deps: JobSubmissionDependencies,
  submission: JobSubmission,
  caller: { account: AccountLimits; idempotencyKey: string | undefined },
): Promise<{ httpStatus: 200 | 202; job: PublicJob }> {
  const deadline = Date.now() + deps.budgetMs;
  const context: CreateJobContext = {
    jobId: newId('job'),
    account: caller.account,
    idempotencyKey: caller.idempotencyKey,
  };
  const request = await createJobRequest(deps, submission, context);
  return deps.rpc.call(jobEndpoints.createJob, request, { timeoutMs: deps.budgetMs, deadline });
}

async function createJobRequest(
  deps: JobSubmissionDependencies,
  submission: JobSubmission,
  context: CreateJobContext,
): Promise<CreateJobRequest> {
  switch (submission.pipeline) {
    case 'audio':
      return audioCreateJob(submission.body, context);
    case 'image':
      return imageCreateJob(submission.body, context);
    case 'text': {
      const { body } = submission;
      if (body.text === undefined) return textCreateJob(body, context, undefined);
      const plan = planInlineText(body.text);
      const storedKey = storageKeys.input(context.account.accountId, context.jobId);
      if (plan.kind === 'stored-text') {
        await deps.objectStore
          .putBuffer(storedKey, plan.bytes, 'text/plain; charset=utf-8')
          .catch(() => {
            throw new ServiceError('UNAVAILABLE', 'Storage is unavailable; retry shortly');
          });
      }
      return textCreateJob(body, context, { plan, storedKey });
    }
  }
}
