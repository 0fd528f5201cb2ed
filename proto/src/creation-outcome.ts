import { ServiceError } from './errors';

/**
 * What a client is told when a job creation fails (docs/decisions.md#when-a-creation-fails).
 * A creation's job id is minted before its first write, so a failed creation always names it:
 * - `not-created`: settled; nothing exists under the id and nothing ever will, nothing is
 *   charged; the request may be sent again;
 * - `unknown`: not settled yet (a service died or stalled mid-creation); GET /v1/jobs/<jobId>
 *   answers the job once it turns out created, or 404 with `outcome: "not-created"` once Tamp
 *   has made sure it never will be. Only then should the client create it again.
 */
export type CreationOutcome = 'not-created' | 'unknown';

export interface CreationOutcomeDetails {
  jobId: string;
  outcome: CreationOutcome;
}

/** UNAVAILABLE for a creation whose outcome could not be settled before answering. */
export function creationOutcomeUnknown(jobId: string): ServiceError {
  const details: CreationOutcomeDetails = { jobId, outcome: 'unknown' };
  return new ServiceError(
    'UNAVAILABLE',
    `The job may or may not have been created. GET /v1/jobs/${jobId} tells which once it is ` +
      'settled, within minutes: the job, or 404 with outcome "not-created". Create it again only then',
    details,
  );
}

/** `error` with the settled outcome of its creation added to its details. */
export function creationNotCreated(error: ServiceError, jobId: string): ServiceError {
  const details: CreationOutcomeDetails = { jobId, outcome: 'not-created' };
  const previous = typeof error.details === 'object' && error.details !== null ? error.details : {};
  return new ServiceError(error.code, error.message, { ...previous, ...details });
}
