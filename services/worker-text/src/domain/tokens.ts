import { countTokens as countO200kTokens } from 'gpt-tokenizer/encoding/o200k_base';

/**
 * Text that looks like a special token ("<|endoftext|>") is user content here, so it is
 * counted as ordinary text instead of being rejected.
 */
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/** Counts tokens with the pinned o200k_base encoding (GPT-4o, GPT-4.1, GPT-5, o-series). */
export function countTokens(text: string): number {
  return countO200kTokens(text, PLAIN_TEXT);
}
