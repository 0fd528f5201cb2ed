import type { JobRead, PublicJobSummary } from '@tamp/proto';
import type { JobDocument } from './job';

/**
 * The output a read resolves outside the domain: a fresh presigned URL, the text kept in the
 * job, or the key of a text kept only in storage, which the gateway reads (jobRead).
 */
export interface ResolvedOutput {
  outputUrl?: string;
  outputText?: string;
  outputTextKey?: string;
}

/** What the single-job read needs to resolve before it can be represented. */
export type OutputToResolve =
  | { kind: 'none' }
  | { kind: 'text'; text: string }
  | { kind: 'stored-text'; key: string }
  | { kind: 'download'; key: string; filename: string };

export function outputToResolve(
  job: Pick<JobDocument, 'status' | 'result' | 'input'>,
): OutputToResolve {
  const result = job.result;
  if (job.status !== 'completed' || result === null || result.expired) return { kind: 'none' };
  if (result.outputText !== null) return { kind: 'text', text: result.outputText };
  if (result.outputKey === null) return { kind: 'none' };
  // Queued text jobs from inline text may leave their output in storage; they still answer text.
  if (job.input.kind === 'text' || job.input.kind === 'stored-text') {
    return { kind: 'stored-text', key: result.outputKey };
  }
  return { kind: 'download', key: result.outputKey, filename: downloadNameOf(result.outputKey) };
}

/** `result.<ext>`, taken from the storage key (`results/<account>/<job>/result.<ext>`). */
export function downloadNameOf(outputKey: string): string {
  return outputKey.slice(outputKey.lastIndexOf('/') + 1) || 'result';
}

/** The job exactly as `publicJob`: `error` only when failed, `result` only once completed. */
export function publicJobOf(job: JobDocument, output: ResolvedOutput = {}): JobRead {
  const representation: JobRead = { id: job._id, status: job.status };
  if (job.status === 'failed') representation.error = job.error ?? 'The job failed';
  if (job.status === 'completed' && job.result !== null) {
    const { metrics, expired } = job.result;
    representation.result = expired ? { metrics, expired: true } : { ...output, metrics };
  }
  return representation;
}

/** An item of `GET /v1/jobs`: no download URL, no output text, the three size metrics. */
export function publicJobSummaryOf(
  job: Pick<
    JobDocument,
    '_id' | 'pipeline' | 'status' | 'filename' | 'error' | 'result' | 'createdAt' | 'completedAt'
  >,
): PublicJobSummary {
  const summary: PublicJobSummary = {
    id: job._id,
    type: job.pipeline,
    status: job.status,
    createdAt: job.createdAt.toISOString(),
  };
  if (job.pipeline !== 'text' && job.filename !== null) summary.name = job.filename;
  if (job.status === 'failed') summary.error = job.error ?? 'The job failed';
  if (job.status === 'completed' && job.result !== null) {
    const { inputSize, outputSize, compressionRatio } = job.result.metrics;
    summary.metrics = { inputSize, outputSize, compressionRatio };
  }
  if (job.completedAt !== null) summary.completedAt = job.completedAt.toISOString();
  return summary;
}
