export type {
  JobRequestBodies,
  Pipeline,
  PublicJob as Job,
  PublicJobSummary as JobSummary,
  PublicOperationCatalogue as OperationCatalogue,
  PublicPresetCatalogue as PresetCatalogue,
  PublicUsage as Usage,
  PublicWebhookEvent as WebhookEvent,
} from '@tamp/proto';
export * from './client';
export * from './errors';
export type { RetryEvent } from './http';
export { DEFAULT_RETRY_POLICY, type RetryPolicy, type RetryReason } from './retry';
export * from './webhooks';
