import { describe, expect, it } from 'vitest';
import { isId, newId } from './ids';
import { creditCost, KB, MB } from './limits';
import { contentTypeFor, extensionOf } from './uploads';

describe('credit costs (1 credit per started unit, at least 1)', () => {
  it.each([
    ['audio', 1, 1],
    ['audio', 5 * MB, 1],
    ['audio', 5 * MB + 1, 2],
    ['image', 2 * MB, 1],
    ['image', 2 * MB + 1, 2],
    ['image', 25 * MB, 13],
    ['text', 0, 1],
    ['text', 100 * KB, 1],
    ['text', 100 * KB + 1, 2],
  ] as const)('%s of %i bytes costs %i', (pipeline, bytes, credits) => {
    expect(creditCost(pipeline, bytes)).toBe(credits);
  });
});

describe('content types by extension (the spec table)', () => {
  it.each([
    ['a.mp3', 'audio/mpeg'],
    ['a.wav', 'audio/wav'],
    ['a.pdf', 'application/pdf'],
    ['a.txt', 'text/plain'],
    ['a.jpg', 'image/jpeg'],
    ['a.JPEG', 'image/jpeg'],
    ['a.png', 'image/png'],
    ['archive.tar.webp', 'image/webp'],
  ])('%s → %s', (filename, type) => {
    expect(contentTypeFor(filename)).toBe(type);
  });

  it('has no content type for other or missing extensions', () => {
    expect(contentTypeFor('a.gif')).toBeUndefined();
    expect(contentTypeFor('noextension')).toBeUndefined();
    expect(contentTypeFor('.png')).toBeUndefined();
    expect(extensionOf('trailing.')).toBeUndefined();
  });
});

describe('ids', () => {
  it('carry a type prefix and a ULID body, and only well-formed ones parse', () => {
    const id = newId('job');
    expect(id).toMatch(/^job_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(isId('job', id)).toBe(true);
    expect(isId('upload', id)).toBe(false);
    expect(isId('job', 'job_123')).toBe(false);
    expect(isId('job', `${id}x`)).toBe(false);
    expect(isId('job', 42)).toBe(false);
  });

  it('sort by creation time', () => {
    expect(newId('job', 1_000) < newId('job', 2_000)).toBe(true);
  });
});
