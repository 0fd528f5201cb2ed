import { describe, expect, it } from 'vitest';
import { isExactNumberLiteral, parseFaithfulJson } from './faithful-json';

describe('isExactNumberLiteral', () => {
  it('accepts literals a double holds exactly, however they are written', () => {
    for (const literal of [
      '0',
      '-0',
      '42',
      '-7',
      '3.14',
      '1.50',
      '1e3',
      '1E+21',
      '2.5e-7',
      '0.1',
    ]) {
      expect(isExactNumberLiteral(literal), literal).toBe(true);
    }
  });

  it('rejects literals that lose digits or overflow', () => {
    for (const literal of [
      '12345678901234567890',
      '0.12345678901234567890123',
      '1e400',
      '9007199254740993',
    ]) {
      expect(isExactNumberLiteral(literal), literal).toBe(false);
    }
  });
});

describe('parseFaithfulJson', () => {
  it('parses ordinary JSON, including a "__proto__" key and keys inside strings', () => {
    expect(parseFaithfulJson('{"a": [1, {"b": "x: y"}], "__proto__": 2}')).toEqual({
      ok: true,
      value: JSON.parse('{"a": [1, {"b": "x: y"}], "__proto__": 2}'),
    });
  });

  it('refuses invalid JSON, duplicate keys and inexact numbers', () => {
    expect(parseFaithfulJson('{a: 1}').ok).toBe(false);
    expect(parseFaithfulJson('{"a": 1, "a": 2}').ok).toBe(false);
    expect(parseFaithfulJson('[{"id": 1}, {"id": 2, "x": {"k": 1, "k": 1}}]').ok).toBe(false);
    expect(parseFaithfulJson('{"id": 12345678901234567890}').ok).toBe(false);
  });
});
