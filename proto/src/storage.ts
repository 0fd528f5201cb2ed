/**
 * Object keys in the one bucket. Filenames never go into keys: they are user input and would
 * make keys guessable and unsafe.
 */
export const storageKeys = {
  upload: (accountId: string, uploadId: string) => `uploads/${accountId}/${uploadId}`,
  /**
   * The copy of an upload taken at its first consumption. Jobs read only this: the client's
   * presigned PUT stays valid for 15 minutes and could replace the original after the checks.
   */
  checkedUpload: (accountId: string, uploadId: string) =>
    `uploads/${accountId}/${uploadId}.checked`,
  input: (accountId: string, jobId: string) => `inputs/${accountId}/${jobId}`,
  result: (accountId: string, jobId: string, extension: string) =>
    `results/${accountId}/${jobId}/result.${extension}`,
} as const;

/** Backstop expiry per key prefix; sweepers keep MongoDB in step before these fire. */
export const STORAGE_LIFECYCLE_RULES = [
  { id: 'expire-uploads', prefix: 'uploads/', days: 2 },
  { id: 'expire-inputs', prefix: 'inputs/', days: 2 },
  { id: 'expire-results', prefix: 'results/', days: 8 },
] as const;
