import { decode } from '@toon-format/toon';
import { describe, expect, it } from 'vitest';
import { convertJsonBlocksToToon, worthConverting } from './json-to-toon';
import { countTokens } from './tokens';

/** 100 rows x 6 fields, the shape TOON is made for. */
const USERS = Array.from({ length: 100 }, (_, i) => ({
  id: i + 1,
  name: `User ${i + 1}`,
  email: `user${i + 1}@example.com`,
  role: i % 3 === 0 ? 'admin' : 'member',
  active: i % 2 === 0,
  score: Math.round(i * 73) / 10,
}));

/** Deep, irregular nesting where TOON has nothing to factor out. */
const IRREGULAR = {
  a: { b: { c: [1, { d: null, e: [true, { f: 'g' }] }] } },
  h: [[1, 2], { i: [3] }],
};

const tokenSaving = (input: string, output: string) => 1 - countTokens(output) / countTokens(input);

/** The body of the first fenced block labelled `label`. */
function fencedBody(text: string, label: string): string {
  const match = new RegExp(`\`\`\`${label}\\n([\\s\\S]*?)\\n\`\`\``).exec(text);
  if (!match?.[1]) throw new Error(`no ${label} block in ${text}`);
  return match[1];
}

describe('convertJsonBlocksToToon on uniform arrays of objects', () => {
  it('saves at least 30 % of the tokens when the whole text is JSON, compact or pretty', () => {
    for (const input of [JSON.stringify(USERS), JSON.stringify(USERS, null, 2)]) {
      const result = convertJsonBlocksToToon(input);
      expect(result).toMatchObject({ blocksConverted: 1, blocksSkipped: 0 });
      expect(tokenSaving(input, result.text)).toBeGreaterThanOrEqual(0.3);
      expect(decode(result.text)).toEqual(USERS);
    }
  });

  it('saves at least 30 % in a fenced block, re-fenced as toon, with the prose kept', () => {
    const before = 'Here are the users:\n\n';
    const after = '\n\nPlease summarise them.';
    for (const label of ['json', '']) {
      const input = `${before}\`\`\`${label}\n${JSON.stringify(USERS, null, 2)}\n\`\`\`${after}`;
      const result = convertJsonBlocksToToon(input);
      expect(result.blocksConverted).toBe(1);
      expect(tokenSaving(input, result.text)).toBeGreaterThanOrEqual(0.3);
      expect(result.text.startsWith(`${before}\`\`\`toon\n`)).toBe(true);
      expect(result.text.endsWith(`\n\`\`\`${after}`)).toBe(true);
      expect(decode(fencedBody(result.text, 'toon'))).toEqual(USERS);
    }
  });

  it('keeps the indentation of an indented fence on every TOON line', () => {
    const input = `- users:\n\n  \`\`\`json\n  ${JSON.stringify(USERS.slice(0, 5))}\n  \`\`\``;
    const result = convertJsonBlocksToToon(input);
    const lines = result.text.split('\n');
    expect(lines[2]).toBe('  ```toon');
    const body = lines.slice(3, -1);
    expect(body.every((line) => line.startsWith('  '))).toBe(true);
    expect(decode(body.map((line) => line.slice(2)).join('\n'))).toEqual(USERS.slice(0, 5));
  });

  it('moves a block embedded in a sentence onto lines of its own, prose unchanged', () => {
    const input = `Data: ${JSON.stringify(USERS.slice(0, 10))} as of today.`;
    const result = convertJsonBlocksToToon(input);
    expect(result.blocksConverted).toBe(1);
    const lines = result.text.split('\n');
    expect(lines[0]).toBe('Data:');
    expect(lines.at(-1)).toBe('as of today.');
    expect(decode(lines.slice(1, -1).join('\n'))).toEqual(USERS.slice(0, 10));
  });

  it('converts a block standing on its own lines in place, keeping its indentation', () => {
    const rows = USERS.slice(0, 8);
    const input = `Intro\n    ${JSON.stringify({ rows })}\nOutro`;
    const result = convertJsonBlocksToToon(input);
    const lines = result.text.split('\n');
    expect([lines[0], lines.at(-1)]).toEqual(['Intro', 'Outro']);
    const body = lines.slice(1, -1);
    expect(body.every((line) => line.startsWith('    '))).toBe(true);
    expect(decode(body.map((line) => line.slice(4)).join('\n'))).toEqual({ rows });
  });

  it('handles strings containing braces, brackets, quotes and escapes', () => {
    const rows = [
      { id: 1, text: 'a } b { c ] [', quote: 'say "hi"' },
      { id: 2, text: '{"not": "json"}', quote: 'back\\slash' },
      { id: 3, text: 'tab\there', quote: '' },
      { id: 4, text: '[1, 2]', quote: 'emoji 👨‍👩‍👧' },
    ];
    const input = `Rows:\n${JSON.stringify(rows, null, 1)}\nDone.`;
    const result = convertJsonBlocksToToon(input);
    expect(result.blocksConverted).toBe(1);
    const lines = result.text.split('\n');
    expect(decode(lines.slice(1, -1).join('\n'))).toEqual(rows);
  });
});

describe('convertJsonBlocksToToon leaves text alone when it should', () => {
  it('keeps a small object in prose byte for byte: a token or two is not worth it', () => {
    const text = 'Send {"id": 42, "name": "Ada"} to the queue, then {"ok": true} back.';
    const result = convertJsonBlocksToToon(text);
    expect(result.text).toBe(text);
    expect(result.blocksConverted).toBe(0);
  });

  it('converts only blocks of 40+ tokens saving 10+ tokens and 10 %', () => {
    expect(worthConverting(39, 10)).toBe(false); // too small, however large the saving
    expect(worthConverting(60, 51)).toBe(false); // saves 9 tokens
    expect(worthConverting(200, 181)).toBe(false); // saves 19 tokens, under 10 %
    expect(worthConverting(60, 50)).toBe(true);
    expect(worthConverting(200, 180)).toBe(true);
  });

  it('skips deeply nested irregular JSON without adding tokens', () => {
    for (const input of [
      JSON.stringify(IRREGULAR),
      `\`\`\`json\n${JSON.stringify(IRREGULAR)}\n\`\`\``,
      `See ${JSON.stringify(IRREGULAR)} here.`,
    ]) {
      const result = convertJsonBlocksToToon(input);
      expect(result).toEqual({ text: input, blocksConverted: 0, blocksSkipped: 1 });
    }
  });

  it('leaves invalid JSON-looking text and ordinary brackets untouched', () => {
    const input = [
      "{name: 'x', rows: [{id: 1}, {id: 2}]}",
      '[{"id": 1}, {"id": 2},]',
      '{"a": [{"b": 1}, {"b": 2}],}',
      '[see above] {{template}} [1] - [ ] todo {"unterminated": "string',
      '```json',
      '{"rows": [{"id": 1}, {"id": 2}], oops}',
      '```',
    ].join('\n');
    const result = convertJsonBlocksToToon(input);
    expect(result.text).toBe(input);
    expect(result.blocksConverted).toBe(0);
    // Only the small valid objects inside the broken arrays count as (skipped) blocks.
    expect(result.blocksSkipped).toBe(3);
    const prose = '[see above] {{template}} [1] [1, 2, 3] - [ ] todo {} [] {"open": "string';
    expect(convertJsonBlocksToToon(prose)).toEqual({
      text: prose,
      blocksConverted: 0,
      blocksSkipped: 0,
    });
  });

  it('finds valid JSON inside a broken outer bracket', () => {
    const inner = JSON.stringify(USERS.slice(0, 6));
    const result = convertJsonBlocksToToon(`{ "broken": ${inner}, }`);
    expect(result.blocksConverted).toBe(1);
    expect(result.text.startsWith('{ "broken":\n')).toBe(true);
  });

  it('does not rewrite JSON that would lose digits or duplicate keys', () => {
    const bigIds = `[${USERS.slice(0, 6)
      .map((u) => `{"id": 1234567890123456789${u.id}, "name": "${u.name}"}`)
      .join(', ')}]`;
    const duplicateKeys = `[${USERS.slice(0, 6)
      .map((u) => `{"id": ${u.id}, "id": 0, "name": "${u.name}"}`)
      .join(', ')}]`;
    for (const input of [bigIds, duplicateKeys]) {
      expect(convertJsonBlocksToToon(input).text).toBe(input);
    }
  });

  it('does not touch code fences of other languages or inline code spans', () => {
    const json = JSON.stringify(USERS.slice(0, 6));
    const input = `\`\`\`js\nconst users = ${json};\n\`\`\`\nInline: \`${json}\` end.`;
    expect(convertJsonBlocksToToon(input)).toEqual({
      text: input,
      blocksConverted: 0,
      blocksSkipped: 0,
    });
  });

  it('is stable: converting its own output changes nothing more', () => {
    const input = `A ${JSON.stringify(USERS.slice(0, 5))}\n\`\`\`json\n${JSON.stringify(USERS.slice(5, 9))}\n\`\`\``;
    const once = convertJsonBlocksToToon(input);
    expect(once.blocksConverted).toBe(2);
    expect(convertJsonBlocksToToon(once.text)).toEqual({
      text: once.text,
      blocksConverted: 0,
      blocksSkipped: 0,
    });
  });

  it('does not emit TOON lines that would open or close a Markdown fence', () => {
    const rows = Array.from({ length: 12 }, () => ({ fence: '```' }));
    const input = `\`\`\`json\n${JSON.stringify(rows)}\n\`\`\``;
    const result = convertJsonBlocksToToon(input);
    for (const line of result.text.split('\n').slice(1, -1)) {
      expect(line.trim().startsWith('```')).toBe(false);
    }
  });
});
