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

/**
 * The content type of each result object, by the extension `storageKeys.result` gets from the
 * pipeline's encode (proto's AUDIO_EXTENSIONS, IMAGE_EXTENSIONS, `txt` for text).
 */
export const RESULT_CONTENT_TYPES: Readonly<Record<string, string>> = {
  ogg: 'audio/ogg',
  mp3: 'audio/mpeg',
  webp: 'image/webp',
  avif: 'image/avif',
  jpg: 'image/jpeg',
  png: 'image/png',
  txt: 'text/plain; charset=utf-8',
};

/**
 * Every lifecycle rule Tamp writes has an ID starting with this, and a rule whose ID does is
 * Tamp's: provisioning replaces those and keeps every other rule of the bucket (an operator's
 * own) as it is.
 */
export const STORAGE_LIFECYCLE_RULE_ID_PREFIX = 'tamp-';

/** Backstop expiry per key prefix; sweepers keep MongoDB in step before these fire. */
export const STORAGE_LIFECYCLE_RULES = [
  { id: 'tamp-expire-uploads', prefix: 'uploads/', days: 2 },
  { id: 'tamp-expire-inputs', prefix: 'inputs/', days: 2 },
  { id: 'tamp-expire-results', prefix: 'results/', days: 8 },
] as const;
