import { createHmac, timingSafeEqual } from 'node:crypto';
import { isId, type JobStatus, type JobType, ServiceError } from '@tamp/proto';

/**
 * The `GET /v1/jobs` cursor: base64url of `<last job id>.<mac>`, where the mac is an HMAC over
 * the id and the query it belongs to (account, type, status). Opaque to clients; a tampered,
 * foreign or otherwise unknown cursor fails the check and is a VALIDATION_ERROR. Forging one
 * would only ever reach the caller's own jobs (the account filter always applies), so the mac
 * is about integrity, not secrecy.
 */
export interface CursorScope {
  accountId: string;
  type: JobType | undefined;
  status: JobStatus | undefined;
}

const MAC_BYTES = 16;

function macOf(secret: string, scope: CursorScope, lastId: string): Buffer {
  return createHmac('sha256', secret)
    .update(`${scope.accountId}\n${scope.type ?? ''}\n${scope.status ?? ''}\n${lastId}`)
    .digest()
    .subarray(0, MAC_BYTES);
}

export function encodeCursor(secret: string, scope: CursorScope, lastId: string): string {
  const mac = macOf(secret, scope, lastId).toString('base64url');
  return Buffer.from(`${lastId}.${mac}`, 'utf8').toString('base64url');
}

/** The last id of the previous page; VALIDATION_ERROR when the cursor is not one we issued. */
export function decodeCursor(secret: string, scope: CursorScope, cursor: string): string {
  const invalid = () =>
    new ServiceError('VALIDATION_ERROR', 'The cursor is invalid', [
      { path: 'cursor', message: 'Unknown or tampered cursor; use nextCursor as returned' },
    ]);
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalid();
  const [lastId, mac, ...rest] = Buffer.from(cursor, 'base64url').toString('utf8').split('.');
  if (lastId === undefined || mac === undefined || rest.length > 0 || !isId('job', lastId)) {
    throw invalid();
  }
  const given = Buffer.from(mac, 'base64url');
  const expected = macOf(secret, scope, lastId);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid();
  return lastId;
}
