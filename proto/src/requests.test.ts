import { describe, expect, it } from 'vitest';
import {
  countCharacters,
  idempotencyKey,
  jobListQuery,
  jobReadQuery,
  textJobBody,
  uploadRequestBody,
} from './requests';
import { NUL_MESSAGE, storableString } from './storable-strings';

describe('countCharacters', () => {
  it('counts astral characters once and lone surrogates as one each', () => {
    expect(countCharacters('')).toBe(0);
    expect(countCharacters('abc')).toBe(3);
    expect(countCharacters('👍🏽')).toBe(2);
    expect(countCharacters('a\uD800b\uDC00')).toBe(4);
    expect(countCharacters('🇩🇪x')).toBe(3);
  });
});

describe('query integers', () => {
  it('read decimal digits only', () => {
    expect(jobListQuery.parse({ limit: '05' }).limit).toBe(5);
    expect(jobReadQuery.parse({ wait: '30' }).wait).toBe(30);
    for (const limit of ['1e2', '0x10', '2.0', ' 5', '+5', '', '-1']) {
      expect(jobListQuery.safeParse({ limit }).success, limit).toBe(false);
    }
    for (const wait of ['0x10', '1e1', '1.5', '31']) {
      expect(jobReadQuery.safeParse({ wait }).success, wait).toBe(false);
    }
  });

  it('take numbers as they are, for a client checking its own request', () => {
    expect(jobListQuery.parse({ limit: 100 }).limit).toBe(100);
    expect(jobListQuery.safeParse({ limit: 1.5 }).success).toBe(false);
  });
});

describe('strings that reach storage', () => {
  it('refuse U+0000 wherever they are, and only U+0000', () => {
    expect(storableString().safeParse('a\u0000b').success).toBe(false);
    expect(storableString().safeParse('a\u0001b\uFFFF😀').success).toBe(true);
    expect(uploadRequestBody.safeParse({ filename: 'a\u0000.png', size: 1 }).success).toBe(false);
    expect(idempotencyKey.safeParse('key\u0000').success).toBe(false);
    const refused = textJobBody.safeParse({
      text: 'ok',
      preset: 'chill',
      webhookUrl: 'https://example.com/a\u0000b',
    });
    expect(refused.error?.issues).toEqual([
      expect.objectContaining({ path: ['webhookUrl'], message: NUL_MESSAGE }),
    ]);
  });
});
