import { decode } from '@toon-format/toon';
import { describe, expect, it } from 'vitest';
import { pick, type Random, seededRandom } from '../../test/support/random-document';
import { convertJsonBlocksToToon } from './json-to-toon';
import { countTokens } from './tokens';

const STRINGS = [
  '',
  'plain',
  'two words',
  'a } b { c',
  '[1, 2]',
  'say "hi"',
  'back\\slash',
  'line\nbreak',
  'tab\there',
  '  padded  ',
  'true',
  '42',
  '-1.5',
  'null',
  'comma, inside',
  'pipe | inside',
  'colon: inside',
  '- dash',
  '#hash',
  'émoji 👨‍👩‍👧 ok',
  '日本語',
  '```',
  '~~~',
  'a\u0000b',
];
const KEYS = ['id', 'name', 'value', 'a b', 'key-with-dash', '', '0', 'ünï', 'x.y', '__proto__'];

function randomPrimitive(random: Random): unknown {
  const roll = random();
  if (roll < 0.35) return pick(random, STRINGS);
  if (roll < 0.6) return Math.floor(random() * 2000) - 1000;
  if (roll < 0.75) return Math.round(random() * 1e6) / 1e3;
  if (roll < 0.85) return random() < 0.5;
  if (roll < 0.9) return pick(random, [1e21, 2.5e-7, -0.5, 0]);
  return null;
}

function randomValue(random: Random, depth: number): unknown {
  const roll = random();
  if (depth > 4 || roll < 0.35) return randomPrimitive(random);
  if (roll < 0.55) {
    // Uniform rows: what TOON's tables are for.
    const fields = Array.from({ length: 1 + Math.floor(random() * 5) }, () => pick(random, KEYS));
    return Array.from({ length: Math.floor(random() * 25) }, () =>
      Object.fromEntries(fields.map((field) => [field, randomPrimitive(random)])),
    );
  }
  if (roll < 0.75) {
    return Array.from({ length: Math.floor(random() * 5) }, () => randomValue(random, depth + 1));
  }
  const entries = Array.from({ length: Math.floor(random() * 5) }, () => [
    pick(random, KEYS),
    randomValue(random, depth + 1),
  ]);
  return Object.fromEntries(entries);
}

function randomContainer(random: Random): unknown {
  for (;;) {
    const value = randomValue(random, 0);
    if (value !== null && typeof value === 'object' && Object.keys(value).length > 0) return value;
  }
}

interface Embedding {
  readonly name: string;
  readonly build: (json: string) => string;
  /** The TOON text of a converted block, cut out of the output. */
  readonly extract: (output: string) => string;
}

const BEFORE = 'Intro paragraph.';
const AFTER = 'Closing words.';

const EMBEDDINGS: readonly Embedding[] = [
  { name: 'whole text', build: (json) => json, extract: (output) => output },
  {
    name: 'fenced',
    build: (json) => `${BEFORE}\n\n\`\`\`json\n${json}\n\`\`\`\n\n${AFTER}`,
    extract: (output) =>
      output.slice(`${BEFORE}\n\n\`\`\`toon\n`.length, -`\n\`\`\`\n\n${AFTER}`.length),
  },
  {
    name: 'own line in prose',
    build: (json) => `${BEFORE}\n${json}\n${AFTER}`,
    extract: (output) => output.slice(`${BEFORE}\n`.length, -`\n${AFTER}`.length),
  },
  {
    name: 'inside a sentence',
    build: (json) => `${BEFORE} ${json} ${AFTER}`,
    extract: (output) => output.slice(`${BEFORE}\n`.length, -`\n${AFTER}`.length),
  },
];

describe('convertJsonBlocksToToon over generated JSON', () => {
  it('either leaves the text as it was or converts to TOON that decodes to the same value, never adding tokens', () => {
    let converted = 0;
    let skipped = 0;
    for (let seed = 1; seed <= 250; seed++) {
      const random = seededRandom(seed);
      const value = randomContainer(random);
      const json = random() < 0.5 ? JSON.stringify(value) : JSON.stringify(value, null, 2);
      for (const embedding of EMBEDDINGS) {
        const input = embedding.build(json);
        const result = convertJsonBlocksToToon(input);
        const context = `${embedding.name}, seed ${seed}: ${input}`;
        expect(countTokens(result.text), context).toBeLessThanOrEqual(countTokens(input));
        if (result.blocksConverted === 0) {
          expect(result.text, context).toBe(input);
          skipped++;
          continue;
        }
        expect(result.blocksConverted, context).toBe(1);
        let decoded: unknown;
        try {
          decoded = decode(embedding.extract(result.text));
        } catch (error) {
          throw new Error(`${context}\n=> ${result.text}\n${error}`);
        }
        expect(decoded, context).toEqual(JSON.parse(json));
        if (embedding.name !== 'whole text') {
          expect(result.text.startsWith(BEFORE), context).toBe(true);
          expect(result.text.endsWith(AFTER), context).toBe(true);
        }
        converted++;
      }
    }
    // Both outcomes must actually occur for the property to mean anything.
    expect(converted).toBeGreaterThan(100);
    expect(skipped).toBeGreaterThan(100);
  });
});
