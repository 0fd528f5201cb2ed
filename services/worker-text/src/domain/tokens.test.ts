import { describe, expect, it } from 'vitest';
import { countTokens } from './tokens';

describe('countTokens (o200k_base)', () => {
  it('counts known o200k token lengths', () => {
    // Reference counts from the o200k_base vocabulary: "hello world" is two tokens; the empty
    // string none.
    expect(countTokens('')).toBe(0);
    expect(countTokens('hello world')).toBe(2);
    expect(countTokens("don't")).toBe(1);
  });

  it('differs from the older cl100k encoding on text where the vocabularies differ', async () => {
    const { countTokens: countCl100k } = await import('gpt-tokenizer/encoding/cl100k_base');
    const text = 'これは日本語の文章です。トークン数はエンコーディングによって異なります。';
    expect(countTokens(text)).not.toBe(countCl100k(text));
  });

  it('treats special-token lookalikes as plain text instead of throwing', () => {
    expect(countTokens('a <|endoftext|> b')).toBeGreaterThan(3);
  });
});
