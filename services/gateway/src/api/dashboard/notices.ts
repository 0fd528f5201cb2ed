import { ServiceError } from '@tamp/proto';
import { z } from 'zod';

/**
 * What a change did, told on the page it redirects to (`?done=<code>`), so reloading that page
 * repeats nothing. Codes, not text: a link someone else crafted can only show these sentences.
 */
const NOTICES = {
  'key-revoked': 'The key is revoked; the API refuses it within seconds.',
  'url-saved': 'Webhook URL saved.',
  'url-cleared': 'No default webhook URL any more.',
  redelivered: 'A new delivery is on its way.',
  'nothing-to-redeliver': 'Nothing to deliver: this job has no webhook target.',
} as const;

export type NoticeCode = keyof typeof NOTICES;

/** The `done` query parameter of a page that may follow a change. */
export const doneQuery = z.object({
  done: z.enum(Object.keys(NOTICES) as [NoticeCode, ...NoticeCode[]]).optional(),
});

export function noticeOf(code: NoticeCode | undefined): string | null {
  return code === undefined ? null : NOTICES[code];
}

/**
 * The message of an error the customer can fix (a 4xx ServiceError: too many active keys, a
 * file's format or size, credits), which a form's page says with status 400; null for anything
 * else, which the plugin's error page answers.
 */
export function customerProblemOf(error: unknown): string | null {
  return error instanceof ServiceError && error.httpStatus < 500 ? error.message : null;
}
