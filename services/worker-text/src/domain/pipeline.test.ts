import type { TextOperation } from '@tamp/proto';
import { decode } from '@toon-format/toon';
import { describe, expect, it } from 'vitest';
import { runTextPipeline } from './pipeline';
import { countTokens } from './tokens';
import { trimText } from './trim';

const ROWS = Array.from({ length: 40 }, (_, i) => ({
  id: i,
  city: `City ${i}`,
  temperature: 10 + (i % 7),
}));

const DOCUMENT = [
  '\uFEFFWeather   report\u200B — “today”\r\n',
  '\r\n\r\n\r\n',
  'Raw data:\r\n',
  '```json\r\n',
  JSON.stringify(ROWS, null, 2).replace(/\n/g, '\r\n'),
  '\r\n```\r\n',
  '\r\n',
  'Thanks 👨‍👩‍👧!   \r\n',
].join('');

/** The presets, as the spec defines them. */
const CHILL: TextOperation[] = [{ type: 'trim', params: { intensity: 30 } }];
const MEDIUM: TextOperation[] = [{ type: 'trim', params: { intensity: 70 } }];
const AGGRESSIVE: TextOperation[] = [
  { type: 'trim', params: { intensity: 80 } },
  { type: 'json-to-toon', params: {} },
];

describe('runTextPipeline', () => {
  it('applies operations in order and reports them', () => {
    const result = runTextPipeline(DOCUMENT, AGGRESSIVE);
    expect(result.operationsApplied).toEqual(['trim', 'json-to-toon']);
    expect(result.text.startsWith('Weather report - "today"\nRaw data:\n```toon\n')).toBe(true);
    expect(result.text.endsWith('```\nThanks 👨‍👩‍👧!')).toBe(true);
    const toon = /```toon\n([\s\S]*)\n```/.exec(result.text)?.[1] ?? '';
    expect(decode(toon)).toEqual(ROWS);
  });

  it('gives the same text as running the operations one by one', () => {
    const result = runTextPipeline(DOCUMENT, [
      { type: 'trim', params: { intensity: 10 } },
      { type: 'trim', params: { intensity: 50 } },
    ]);
    expect(result.text).toBe(trimText(trimText(DOCUMENT, 10), 50));
  });

  it('counts o200k tokens of input and output and code points of the input', () => {
    const result = runTextPipeline(DOCUMENT, MEDIUM);
    expect(result.tokensIn).toBe(countTokens(DOCUMENT));
    expect(result.tokensOut).toBe(countTokens(result.text));
    expect(result.charactersIn).toBe([...DOCUMENT].length);
    expect(result.charactersIn).toBeLessThan(DOCUMENT.length); // the emoji take surrogate pairs
  });

  it('saves more tokens from chill to medium to aggressive on a typical document', () => {
    const tokens = [CHILL, MEDIUM, AGGRESSIVE].map(
      (ops) => runTextPipeline(DOCUMENT, ops).tokensOut,
    );
    expect(tokens[0]).toBeLessThan(countTokens(DOCUMENT));
    expect(tokens[1]).toBeLessThanOrEqual(tokens[0]!);
    expect(tokens[2]).toBeLessThan(tokens[1]!);
  });

  it('with no effective change still reports the counts', () => {
    const result = runTextPipeline('plain', [{ type: 'json-to-toon', params: {} }]);
    expect(result).toEqual({
      text: 'plain',
      operationsApplied: ['json-to-toon'],
      tokensIn: 1,
      tokensOut: 1,
      charactersIn: 5,
    });
  });
});
