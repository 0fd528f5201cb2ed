/**
 * JSON.parse loses information silently in two cases: a number literal that a double cannot
 * hold exactly (12345678901234567890, 1e400) and a key that appears twice in one object (the
 * last one wins). Rewriting such a block from its parsed value would change its meaning, so
 * those blocks are treated as not faithfully parseable.
 */

const NUMBER_LITERAL = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const DECIMAL_PARTS = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/** A decimal literal reduced to sign, significant digits and exponent, e.g. "-15e-1". */
function canonicalDecimal(literal: string): string | undefined {
  const match = DECIMAL_PARTS.exec(literal);
  if (!match) return undefined;
  const [, sign = '', integer = '', fraction = '', exponent = '0'] = match;
  const digits = `${integer}${fraction}`.replace(/^0+/, '');
  if (digits === '') return '0';
  const significant = digits.replace(/0+$/, '');
  const scale = Number(exponent) - fraction.length + (digits.length - significant.length);
  return `${sign}${significant}e${scale}`;
}

/** True when the double nearest to `literal` prints back as the same decimal value. */
export function isExactNumberLiteral(literal: string): boolean {
  const canonical = canonicalDecimal(literal);
  return canonical !== undefined && canonical === canonicalDecimal(String(Number(literal)));
}

interface SourceFacts {
  readonly keys: number;
  readonly allNumbersExact: boolean;
}

/** Lexes JSON text that JSON.parse has already accepted. */
function inspectSource(source: string): SourceFacts {
  let keys = 0;
  let allNumbersExact = true;
  let i = 0;
  while (i < source.length) {
    const char = source[i];
    if (char === '"') {
      let j = i + 1;
      while (source[j] !== '"') j += source[j] === '\\' ? 2 : 1;
      let k = j + 1;
      while (k < source.length && ' \t\n\r'.includes(source[k] ?? '')) k++;
      if (source[k] === ':') keys++;
      i = j + 1;
    } else if (char === '-' || (char !== undefined && char >= '0' && char <= '9')) {
      NUMBER_LITERAL.lastIndex = i;
      const literal = NUMBER_LITERAL.exec(source)?.[0] ?? char;
      if (!isExactNumberLiteral(literal)) allNumbersExact = false;
      i += literal.length;
    } else {
      i++;
    }
  }
  return { keys, allNumbersExact };
}

function countParsedKeys(value: unknown): number {
  let keys = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const current = pending.pop();
    // Pushed one by one: spreading a very large array into push() overflows the call stack.
    if (Array.isArray(current)) {
      for (const item of current) pending.push(item);
    } else if (current !== null && typeof current === 'object') {
      for (const item of Object.values(current)) {
        keys++;
        pending.push(item);
      }
    }
  }
  return keys;
}

export type FaithfulParse = { readonly ok: true; readonly value: unknown } | { readonly ok: false };

/** Parses JSON text, refusing text whose parsed value would not represent it faithfully. */
export function parseFaithfulJson(source: string): FaithfulParse {
  let value: unknown;
  try {
    value = JSON.parse(source);
  } catch {
    return { ok: false };
  }
  const facts = inspectSource(source);
  if (!facts.allNumbersExact || facts.keys !== countParsedKeys(value)) return { ok: false };
  return { ok: true, value };
}
