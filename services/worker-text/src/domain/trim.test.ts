import { describe, expect, it } from 'vitest';
import { TRIM_BANDS, trimBandIndex, trimText } from './trim';

describe('TRIM_BANDS', () => {
  it('covers 0 to 100 without gaps or overlaps, each band adding at least one change', () => {
    expect(TRIM_BANDS[0]?.from).toBe(0);
    expect(TRIM_BANDS.at(-1)?.to).toBe(100);
    TRIM_BANDS.forEach((band, i) => {
      expect(band.changes.length).toBeGreaterThan(0);
      if (i > 0) expect(band.from).toBe(TRIM_BANDS[i - 1]!.to + 1);
    });
  });

  it('maps intensities to bands, fractions included, and rejects values out of range', () => {
    expect(trimBandIndex(0)).toBe(0);
    expect(trimBandIndex(19.5)).toBe(0);
    expect(trimBandIndex(30)).toBe(1);
    expect(trimBandIndex(70)).toBe(3);
    expect(trimBandIndex(80)).toBe(4);
    expect(trimBandIndex(100)).toBe(4);
    for (const bad of [-1, 101, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => trimText('x', bad)).toThrow(RangeError);
    }
  });
});

describe('trimText at intensity 0 (minimal)', () => {
  it('normalizes line endings, trailing whitespace and blank lines at both ends only', () => {
    const input = '\r\n\n  Title  \r\nfirst  line\t\rsecond\u00A0line\n\n\n\nend\u3000\n\n';
    expect(trimText(input, 0)).toBe('  Title\nfirst  line\nsecond\u00A0line\n\n\n\nend');
  });

  it('leaves invisible characters and typography alone', () => {
    const input = 'zero\u200Bwidth “quotes” — ＡＢＣ';
    expect(trimText(input, 0)).toBe(input);
  });
});

describe('trimText at intensity 20-39 (light, the chill preset uses 30)', () => {
  it('collapses blank-line runs and space runs but keeps indentation and tabs', () => {
    const input = 'a   b\n\n\n\n    indented   text\n\tname\t\tvalue';
    expect(trimText(input, 30)).toBe('a b\n\n    indented text\n\tname\t\tvalue');
  });

  it('shrinks aligned Markdown tables', () => {
    const input = '| Name      | Age   |\n|-----------|-------|\n| Ada       | 36    |';
    expect(trimText(input, 30)).toBe('| Name | Age |\n|-----------|-------|\n| Ada | 36 |');
  });
});

describe('trimText at intensity 40-59 (invisible characters)', () => {
  it('turns Unicode spaces into spaces and drops invisible characters', () => {
    const input = '\uFEFFnon\u00A0breaking\u2009thin hel\u200Blo co\u00ADoperate \u200Eltr\u0007';
    expect(trimText(input, 50)).toBe('non breaking thin hello cooperate ltr');
  });

  it('keeps joiners that emoji and scripts need, drops stray ones', () => {
    const family = '👨‍👩‍👧‍👦';
    const rainbow = '🏳️‍🌈';
    const persian = 'می\u200Cخواهم';
    const malayalam = 'ന\u0D4D\u200D';
    const input = `${family} ${rainbow} ${persian} ${malayalam}x stray\u200D !`;
    expect(trimText(input, 50)).toBe(`${family} ${rainbow} ${persian} ${malayalam}x stray !`);
  });

  it('keeps invisible characters next to backticks so code spans cannot merge', () => {
    expect(trimText('`a`\u200B`b`', 50)).toBe('`a`\u200B`b`');
  });
});

describe('trimText at intensity 60-79 (normalization, the medium preset uses 70)', () => {
  it('folds full-width and mathematical forms and composes accents', () => {
    expect(trimText('ＡＢＣ１２３ 𝐁𝐨𝐥𝐝 𝟒𝟐 cafe\u0301 ｶﾞｷﾞ', 70)).toBe('ABC123 Bold 42 café ガギ');
  });

  it('turns typographic punctuation into ASCII', () => {
    expect(trimText('“Don’t” – 2010–2015, −5, 5′ 10″, a — b', 70)).toBe(
      `"Don't" - 2010-2015, -5, 5' 10", a - b`,
    );
  });

  it('keeps characters whose plain form would change the meaning or lengthen the text', () => {
    const kept = 'x² H₂O ½ ① Ⅻ ™ ﬁnd … left—right 豈 \u0958';
    expect(trimText(kept, 79)).toBe(kept);
  });

  it('does not start a list from a dash that opens a line', () => {
    expect(trimText('— quoted speech', 70)).toBe('— quoted speech');
    expect(trimText('end —', 70)).toBe('end -');
  });
});

describe('trimText at intensity 80-100 (aggressive)', () => {
  it('removes blank lines and shortens filler runs', () => {
    const input = 'Contents\n\nIntro ............ 5\n\n\n==========\nName: ________ ----------';
    expect(trimText(input, 80)).toBe('Contents\nIntro ... 5\n===\nName: ___ ---');
  });

  it('leaves heading, emphasis and strike-through markers alone', () => {
    const input = '#### Title\n****bold****\n~~~~ not a fence? it is one';
    expect(trimText(input, 100)).toBe(input);
  });
});

describe('trimText and code', () => {
  const block = ['```ts', 'const  s = “curly”\u00A0—\u200B x;', '', '', '\tif (a  &&  b) {', '```'];

  it('keeps fenced code byte for byte except trailing whitespace, at every intensity', () => {
    const input = `Intro   text\r\n${block.map((line) => `${line}  `).join('\r\n')}\r\nAfter\u200B  text`;
    for (const intensity of [0, 30, 50, 70, 100]) {
      expect(trimText(input, intensity)).toContain(block.join('\n'));
    }
    expect(trimText(input, 100)).toBe(`Intro text\n${block.join('\n')}\nAfter text`);
  });

  it('recognises tilde fences, longer fences and fences indented in lists', () => {
    const input = '- item\n\n    ~~~~\n    a  “b”\n    ~~~\n    ~~~~\n\n- next  item';
    expect(trimText(input, 100)).toBe(
      '- item\n    ~~~~\n    a  “b”\n    ~~~\n    ~~~~\n- next item',
    );
  });

  it('treats an unclosed fence as code up to the end', () => {
    expect(trimText('a  b\n```\nx  “y”\n\n\n', 100)).toBe('a b\n```\nx  “y”');
  });

  it('keeps inline code spans, including double-backtick spans', () => {
    const input = 'Run  `npm  run  “x”`  or ``a ` b``  —  fine';
    expect(trimText(input, 100)).toBe('Run `npm  run  “x”` or ``a ` b`` - fine');
  });
});
