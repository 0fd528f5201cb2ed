import { z } from 'zod';

/**
 * What every string a request hands to storage must be: free of U+0000. PostgreSQL, which
 * FerretDB keeps documents in, cannot hold that character in jsonb (SQLSTATE 22P05), so such a
 * string is refused when it arrives, with 400 VALIDATION_ERROR naming the field, instead of
 * failing later as a 500 or as a job that fails four times (docs/decisions.md#strings).
 * Ids are not checked with it: an id that does not parse is unknown (docs/decisions.md#ids).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is exactly what is refused.
const WITHOUT_NUL = /^[^\u0000]*$/;

export const NUL_MESSAGE = 'must not contain U+0000 (NUL), which cannot be stored';

/** The check, for string formats (URLs) that are not plain `z.string()`. */
export const withoutNul = () => z.regex(WITHOUT_NUL, NUL_MESSAGE);

/** A string that may be stored: any text without U+0000. */
export const storableString = () => z.string().check(withoutNul());
