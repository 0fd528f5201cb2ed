import { decodeTime, monotonicFactory } from 'ulid';

/** Every public id carries a type prefix and a sortable ULID body, e.g. `job_01J…`. */
export const ID_PREFIXES = {
  upload: 'upl',
  job: 'job',
  account: 'acct',
  apiKey: 'key',
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/**
 * Monotonic within a millisecond, so ids made in the same millisecond still sort in creation
 * order (job lists are ordered by id).
 */
const ulid = monotonicFactory();

export function newId(kind: IdKind, now: number = Date.now()): string {
  return `${ID_PREFIXES[kind]}_${ulid(now)}`;
}

/**
 * True when `value` is a well-formed id of `kind`. Callers treat anything else as unknown
 * (JOB_NOT_FOUND / UPLOAD_NOT_FOUND), never as a validation error.
 */
export function isId(kind: IdKind, value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const prefix = `${ID_PREFIXES[kind]}_`;
  return value.startsWith(prefix) && ULID_PATTERN.test(value.slice(prefix.length));
}

/** When a well-formed id was minted (milliseconds since the epoch), from its ULID body. */
export function mintedAt(id: string): number {
  return decodeTime(id.slice(id.indexOf('_') + 1));
}
