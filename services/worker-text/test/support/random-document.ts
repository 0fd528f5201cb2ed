/**
 * Seeded generator of messy, realistic documents for property tests: prose in many scripts,
 * numbers, emoji (ZWJ families, flags, skin tones, keycaps), Markdown, fenced code blocks,
 * tabs, CRLF, Unicode spaces and invisible characters. It records the code it inserted so
 * tests can check that code survives untouched.
 */

import { type Random, seededRandom } from '@tamp/scripts/fixtures/seeded-random';

export { type Random, seededRandom };

export function pick<T>(random: Random, items: readonly T[]): T {
  const item = items[Math.floor(random() * items.length)];
  if (item === undefined) throw new Error('pick from an empty list');
  return item;
}

function times(random: Random, min: number, max: number): number {
  return min + Math.floor(random() * (max - min + 1));
}

const WORDS = [
  'the',
  'quick',
  'Brown',
  'fox',
  'jumps',
  'over',
  'lazy',
  'dog',
  'compression',
  'token',
  'naïve',
  'café',
  'cafe\u0301',
  'Ångström',
  'resume\u0301',
  'Straße',
  'Œuvre',
  'déjà',
  '日本語',
  '中文',
  '東京',
  '한국어',
  '\u1112\u1161\u11AB',
  'مرحبا',
  'שלום',
  'Привет',
  'γειά',
  'नमस्ते',
  'क़लम',
  '\u0958',
  'می\u200Cخواهم',
  'ภาษาไทย',
  'ｶﾞｷﾞ',
  'ﾃｽﾄ',
  'Ｆｕｌｌ',
  '𝐁𝐨𝐥𝐝',
  '𝑖𝑡𝑎𝑙𝑖𝑐',
  'ﬁnd',
  'ﬂow',
  'x²',
  'H₂O',
  'Ⅻ',
  '™',
  '℃',
  'Ω',
  'hel\u200Blo',
  'co\u00ADoperate',
  'ab\u200Dcd',
  'snake_case',
  'CamelCase',
  'e-mail',
];

const NUMBERS = [
  '0',
  '7',
  '42',
  '-13',
  '3.14159',
  '1,234,567.89',
  '2024-05-01',
  '12:30',
  '1e10',
  '0x1F',
  '１２３',
  '𝟒𝟐',
  '½',
  '¾',
  '①',
  '٣٤٥',
  '४२',
  '10%',
  '$99.99',
  '+49 30 1234567',
];

const EMOJI = [
  '😀',
  '👍',
  '👍🏽',
  '👩🏿‍💻',
  '👨‍👩‍👧‍👦',
  '🧑‍🤝‍🧑',
  '🏳️‍🌈',
  '🏴‍☠️',
  '❤️',
  '❤️‍🔥',
  '🇩🇪',
  '🇯🇵',
  '🏴󠁧󠁢󠁳󠁣󠁴󠁿',
  '1️⃣',
  '#️⃣',
  '✌🏻',
  '🙂',
  '👁️‍🗨️',
  '©️',
  '☺️',
];

const PUNCTUATION = [
  ',',
  '.',
  '!',
  '?',
  ';',
  ':',
  '…',
  '...',
  '!!!',
  '?!',
  '“',
  '”',
  '‘',
  '’',
  '«',
  '»',
  '—',
  ' — ',
  '–',
  '-',
  '−',
  '′',
  '″',
  '(',
  ')',
  '[',
  ']',
  '{',
  '}',
  '/',
  '&',
  '@',
  '#',
  '*',
  '"',
  "'",
  '，',
  '。',
  '：',
  '（',
  '）',
  '....',
  '........',
  '-----',
  '____',
  '=====',
  '~',
];

const SEPARATORS = [
  ' ',
  ' ',
  ' ',
  ' ',
  '  ',
  '   ',
  '\t',
  ' \t ',
  '\u00A0',
  '\u2009',
  '\u202F',
  '\u3000',
  ' \u200B',
  '\u200B',
  '\u2060',
  '\u00AD',
  '\u200E',
  '\u200F',
  '\uFEFF',
  '\u200D',
  '\u0001',
  '\f',
];

const INDENTATION = ['', '', '', ' ', '  ', '    ', '\t', '\t\t', '  \t'];

const LINE_PREFIX = ['', '', '', '', '- ', '* ', '1. ', '> ', '## ', '| ', '- [ ] '];

const LINE_END = ['\n', '\n', '\n', '\n', '\r\n', '\r\n', '\r'];

const CODE_LINES = [
  'const  answer = 42;',
  '  if (a  &&  b) {',
  '\treturn “quoted” — value…;',
  '    nested   indentation\t\tand tabs',
  'zero\u200Bwidth and\u00A0nbsp stay',
  '',
  '   ',
  '$ echo   "hello   world"   # comment',
  '| col  | col  |',
  'def f(x):  return x**2  ## ２ ｘ',
  '........ -----',
];

export interface GeneratedDocument {
  readonly text: string;
  /** Each fenced block as trim must emit it: trailing spaces and tabs removed, LF endings. */
  readonly codeBlocks: readonly string[];
  /** Inline code spans, which trim must keep byte for byte. */
  readonly codeSpans: readonly string[];
}

export interface GeneratorOptions {
  /** Also produce lone backticks and fence-like characters in prose (code checks then no longer apply). */
  readonly strayMarkers?: boolean;
}

function token(random: Random): string {
  const roll = random();
  if (roll < 0.55) return pick(random, WORDS);
  if (roll < 0.7) return pick(random, NUMBERS);
  if (roll < 0.82) return pick(random, EMOJI);
  return pick(random, PUNCTUATION);
}

export function generateDocument(
  random: Random,
  options: GeneratorOptions = {},
): GeneratedDocument {
  const parts: string[] = [];
  const codeBlocks: string[] = [];
  const codeSpans: string[] = [];
  const blocks = times(random, 2, 12);
  for (let b = 0; b < blocks; b++) {
    const roll = random();
    if (roll < 0.2) {
      const marker = pick(random, ['```', '```', '~~~', '````']);
      const info = pick(random, ['', 'js', 'json', 'python', 'text  ']);
      const indent = pick(random, ['', '', '  ']);
      const opener = `${indent}${marker}${info}`;
      const body = Array.from({ length: times(random, 0, 6) }, () => {
        const trailing = pick(random, ['', '', '  ', '\t', ' \t']);
        return `${pick(random, INDENTATION)}${pick(random, CODE_LINES)}${trailing}`;
      });
      const closer = `${indent}${marker}`;
      const lineEnd = pick(random, ['\n', '\r\n']);
      parts.push([opener, ...body, closer].join(lineEnd), lineEnd);
      codeBlocks.push(
        [opener, ...body, closer].map((line) => line.replace(/[ \t]+$/, '')).join('\n'),
      );
      continue;
    }
    if (roll < 0.3) {
      parts.push(pick(random, ['', '   ', '\t', '\u00A0', '\u200B']), pick(random, LINE_END));
      continue;
    }
    const lines = times(random, 1, 4);
    for (let l = 0; l < lines; l++) {
      let line = pick(random, INDENTATION) + pick(random, LINE_PREFIX);
      const tokens = times(random, 1, 14);
      for (let t = 0; t < tokens; t++) {
        if (t > 0) line += pick(random, SEPARATORS);
        if (random() < 0.06) {
          const span = pick(random, [
            '`a  b`',
            '`“x”  —  y`',
            '``a ` b``',
            '`ＡＢ\u00A0Ｃ`',
            '` `',
          ]);
          codeSpans.push(span);
          line += span;
        } else if (options.strayMarkers && random() < 0.15) {
          line += pick(random, ['`', '``', '~~', '\uFF40', '\uFF5E', '\u1FEF', '>', '\u200B`']);
        } else {
          line += token(random);
        }
      }
      line += pick(random, ['', '', '', ' ', '  ', '\t', '\u00A0']);
      parts.push(line, pick(random, LINE_END));
    }
  }
  if (random() < 0.3) parts.push(pick(random, ['\n\n\n', '  \n', '\r\n\r\n']));
  return { text: parts.join(''), codeBlocks, codeSpans };
}

/** Random soup of the characters trim treats specially, for idempotence and monotonicity. */
export function generateCharacterSoup(random: Random): string {
  const alphabet = [
    'a',
    'b',
    'Z',
    '1',
    '9',
    ' ',
    ' ',
    '  ',
    '\t',
    '\n',
    '\n',
    '\r\n',
    '\r',
    '`',
    '``',
    '```',
    '~~~',
    '~',
    '>',
    '.',
    '-',
    '=',
    '_',
    '—',
    ' — ',
    '“',
    '’',
    '\u00A0',
    '\u3000',
    '\u200B',
    '\u200D',
    '\u200C',
    '\uFEFF',
    '\u00AD',
    '\u0301',
    '\u0308',
    'e',
    'A\u030A',
    '\u212B',
    '\u1100',
    '\u1161',
    '\u11A8',
    '\u0958',
    '\uFF40',
    '\uFF5E',
    '\uFF21',
    '\uFF76',
    '\uFF9E',
    '\uFFE3',
    '\u1FEF',
    '\u{1D400}',
    '\u{1D7CE}',
    '😀',
    '👨‍👩‍👧',
    '🇩🇪',
    '❤️',
    '\uFE0F',
    '\u0000',
    '\u0085',
    '\u2028',
    '\f',
    'ﬁ',
    '½',
    '²',
  ];
  const length = times(random, 1, 80);
  let soup = '';
  for (let i = 0; i < length; i++) soup += pick(random, alphabet);
  return soup;
}
