import {
  type JobCreationMetrics,
  type ObjectStore,
  type Rpc,
  UndeliveredCallError,
} from '@tamp/kit';
import {
  type AccountLimits,
  type CreateJobInput,
  creationNotCreated,
  creationOutcomeUnknown,
  jobEndpoints,
  newId,
  type PublicJob,
  presetLabel,
  ServiceError,
  storageKeys,
} from '@tamp/proto';
import { type CreateJobContext, textCreateJob, uploadCreateJob } from '../domain/create-job';
import { planInlineText } from '../domain/inline-text';
import type { AudioJobBody, ImageJobBody, TextJobBody } from '../domain/job-requests';

export type JobSubmission =
  | { pipeline: 'audio'; body: AudioJobBody }
  | { pipeline: 'image'; body: ImageJobBody }
  | { pipeline: 'text'; body: TextJobBody };

export interface JobSubmissionOptions {
  rpc: Rpc;
  objectStore: ObjectStore;
  /** The whole budget of one creation (CREATE_JOB_BUDGET_MS). */
  budgetMs: number;
  /** Creations forwarded at once before new ones are shed (MAX_CONCURRENT_CREATIONS). */
  maxConcurrent: number;
  /** Jobs created by pipeline and preset (absent in tests that do not read them). */
  jobsCreated?: JobCreationMetrics;
}

/** Shed at once: queued behind this many, the request would miss its budget anyway. */
export class CreationsSaturatedError extends ServiceError {
  /** Sooner than UNAVAILABLE's default: a slot frees as soon as one creation answers. */
  readonly retryAfterSeconds = 1;

  constructor() {
    super('UNAVAILABLE', 'Too many job creations at once; retry shortly');
  }
}

/**
 * POST /v1/<pipeline>: mints the job id, stores text too large to cross NATS under the job's
 * input key, and asks the job service to create the job, all within one budget whose deadline
 * travels with the call, so every internal step stops in time for a 503 to reach the client.
 */
export class JobSubmissions {
  private inFlight = 0;

  constructor(private readonly options: JobSubmissionOptions) {}

  async submit(
    submission: JobSubmission,
    caller: { account: AccountLimits; idempotencyKey: string | undefined },
  ): Promise<{ httpStatus: 200 | 202; job: PublicJob }> {
    if (this.inFlight >= this.options.maxConcurrent) throw new CreationsSaturatedError();
    this.inFlight++;
    try {
      const { budgetMs, rpc } = this.options;
      const deadline = Date.now() + budgetMs;
      const context: CreateJobContext = {
        jobId: newId('job'),
        account: caller.account,
        idempotencyKey: caller.idempotencyKey,
      };
      const request = await this.createJobRequest(submission, context);
      const created = await rpc
        .call(jobEndpoints.createJob, request, { timeoutMs: budgetMs, deadline })
        .catch((error: unknown) => {
          throw namingTheJob(error, context.jobId);
        });
      this.options.jobsCreated?.inc({
        pipeline: submission.pipeline,
        preset: presetLabel(request.preset ?? null),
      });
      return created;
    } finally {
      this.inFlight--;
    }
  }

  private async createJobRequest(
    submission: JobSubmission,
    context: CreateJobContext,
  ): Promise<CreateJobInput> {
    switch (submission.pipeline) {
      case 'audio':
        return uploadCreateJob('audio', submission.body.audioId, submission.body, context);
      case 'image':
        return uploadCreateJob('image', submission.body.imageId, submission.body, context);
      case 'text': {
        const { body } = submission;
        if (body.text === undefined) return textCreateJob(body, context, undefined);
        const plan = planInlineText(body.text);
        const storedKey = storageKeys.input(context.account.accountId, context.jobId);
        if (plan.kind === 'stored-text') {
          await this.options.objectStore
            .putBuffer(storedKey, plan.bytes, 'text/plain; charset=utf-8')
            .catch(() => {
              throw new ServiceError('UNAVAILABLE', 'Storage is unavailable; retry shortly');
            });
        }
        return textCreateJob(body, context, { plan, storedKey });
      }
    }
  }
}

/**
 * A creation that failed without the job service settling it (no answer in time: it may have
 * died or stalled mid-creation) has an unknown outcome; the answer says so and names the job id,
 * which GET /v1/jobs/<id> then tells (docs/decisions.md#when-a-creation-fails). One that reached
 * no job service at all is settled: nothing received the id, and this gateway sends it no more.
 * Answers the job service gave itself already carry their outcome.
 */
function namingTheJob(error: unknown, jobId: string): unknown {
  if (error instanceof UndeliveredCallError) return creationNotCreated(error, jobId);
  if (!(error instanceof ServiceError) || error.code !== 'UNAVAILABLE') return error;
  const details = error.details as { jobId?: unknown } | undefined;
  return details?.jobId === undefined ? creationOutcomeUnknown(jobId) : error;
}
