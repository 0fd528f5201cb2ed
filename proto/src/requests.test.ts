import { describe, expect, it } from 'vitest';
import { countCharacters } from './requests';

describe('countCharacters', () => {
  it('counts astral characters once and lone surrogates as one each', () => {
    expect(countCharacters('')).toBe(0);
    expect(countCharacters('abc')).toBe(3);
    expect(countCharacters('👍🏽')).toBe(2);
    expect(countCharacters('a\uD800b\uDC00')).toBe(4);
    expect(countCharacters('🇩🇪x')).toBe(3);
  });
});
