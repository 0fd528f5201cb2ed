import type { Rpc } from '@tamp/kit';
import type { TargetPolicy } from '@tamp/proto';
import type { FileCompressions } from '../../application/file-compression';
import type { JobReads } from '../../application/job-reads';
import type { JobSubmissions } from '../../application/job-submission';

/** What the public routes call: the application's use cases, and RPC for one-call reads. */
export interface RouteDependencies {
  rpc: Rpc;
  jobReads: JobReads;
  jobSubmissions: JobSubmissions;
  /** The dashboard's "try it": a file sent with a form, compressed with one preset. */
  fileCompressions: FileCompressions;
  /** Where this deployment delivers webhooks; a job's webhookUrl is checked against it. */
  webhookTargets: TargetPolicy;
}
