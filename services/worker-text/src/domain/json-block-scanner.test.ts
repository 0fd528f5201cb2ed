import { describe, expect, it } from 'vitest';
import { findEmbeddedJson } from './json-block-scanner';

/** A parser that accepts whatever JSON.parse accepts, recording every span it was asked about. */
function recordingParser(text: string) {
  const asked: string[] = [];
  const parse = (start: number, end: number): unknown => {
    const source = text.slice(start, end);
    asked.push(source);
    try {
      return JSON.parse(source);
    } catch {
      return undefined;
    }
  };
  return { parse, asked };
}

describe('findEmbeddedJson', () => {
  it('finds objects and arrays in prose with their exact offsets', () => {
    const text = 'Users {"a": 1} and [1, [2, 3]] end';
    const { parse } = recordingParser(text);
    const found = findEmbeddedJson(text, parse);
    expect(found.map((b) => text.slice(b.start, b.end))).toEqual(['{"a": 1}', '[1, [2, 3]]']);
    expect(found[1]?.value).toEqual([1, [2, 3]]);
  });

  it('respects strings: brackets and escaped quotes inside them do not count', () => {
    const text = 'x {"a": "} ] \\" { [", "b": ["]"]} y';
    const { parse } = recordingParser(text);
    const found = findEmbeddedJson(text, parse);
    expect(found).toHaveLength(1);
    expect(found[0]?.value).toEqual({ a: '} ] " { [', b: [']'] });
  });

  it('rejects ordinary prose brackets without asking the parser', () => {
    const text = '[see above] {name} {{template}} [x](http://link) ["unterminated\n"]';
    const { parse, asked } = recordingParser(text);
    expect(findEmbeddedJson(text, parse)).toEqual([]);
    expect(asked).toEqual([]);
  });

  it('tries the complete inner spans of a broken outer bracket', () => {
    const text = '{"rows": [{"id": 1}, {"id": 2}], oops} [[1, 2], [3, 4],]';
    const { parse } = recordingParser(text);
    const found = findEmbeddedJson(text, parse).map((b) => text.slice(b.start, b.end));
    expect(found).toEqual(['[{"id": 1}, {"id": 2}]', '[1, 2]', '[3, 4]']);
  });

  it('does not look inside a span the parser accepted', () => {
    const text = '[[1], [2]]';
    const { parse, asked } = recordingParser(text);
    expect(findEmbeddedJson(text, parse)).toHaveLength(1);
    expect(asked).toEqual(['[[1], [2]]']);
  });

  it('only scans the requested range', () => {
    const text = '[1] [2] [3]';
    const { parse } = recordingParser(text);
    expect(findEmbeddedJson(text, parse, 4, 7).map((b) => b.value)).toEqual([[2]]);
  });

  it('gets through adversarial bracket soups (a quadratic scan would time out)', () => {
    const soups = [
      '['.repeat(300_000),
      '{"a":'.repeat(100_000),
      '[1,'.repeat(100_000),
      `${'[['.repeat(50_000)}x`,
      '"['.repeat(100_000),
    ];
    for (const text of soups) {
      const { parse } = recordingParser(text);
      expect(findEmbeddedJson(text, parse)).toEqual([]);
    }
  });
});
