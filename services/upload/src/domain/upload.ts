import type { UploadExtension } from '@tamp/proto';
import type { ContentFormat } from './signature';

/** An upload as this service keeps it (the `uploads` collection, owned by this service alone). */
export interface Upload {
  /** The upload id (`upl_…`). */
  _id: string;
  accountId: string;
  /** As the client sent it; only ever displayed, never part of a storage key. */
  filename: string;
  extension: UploadExtension;
  /** Derived from the extension; the presigned PUT is bound to it. */
  contentType: string;
  /** The size the client announced at creation; the real size is measured at first consumption. */
  declaredSize: number;
  key: string;
  createdAt: Date;
  /** createdAt + 24 h: after it no job may consume the upload. */
  expiresAt: Date;
  /** What the first consumption found in storage; null until a job first finds the object. */
  consumption: FirstConsumption | null;
}

/**
 * The facts measured once, when a job first finds the object in storage. They are stored rather
 * than a bare pass/fail verdict so that the plan limit is applied with the limit of the job at
 * hand: an account that upgrades from 25 MB to 100 MB can use a 40 MB upload it could not use
 * before, and a downgraded account cannot use it any more, without storage being read again.
 */
export interface FirstConsumption {
  checkedAt: Date;
  /** The real size in storage, in bytes. */
  size: number;
  /** What the leading bytes are, or null when no known signature matched (or none was read). */
  detectedFormat: ContentFormat | null;
  /** Why the content does not match the upload's kind; null when it does or the kind is text. */
  formatProblem: string | null;
}
