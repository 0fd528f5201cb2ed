import { ServiceError } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { parseFilename } from './filename';

const codeOf = (filename: string) => {
  try {
    parseFilename(filename);
    return 'ok';
  } catch (error) {
    return error instanceof ServiceError ? error.code : 'unexpected';
  }
};

describe('parseFilename', () => {
  it('derives the content type from the extension, in any letter case', () => {
    expect(parseFilename('song.mp3')).toEqual({ extension: '.mp3', contentType: 'audio/mpeg' });
    expect(parseFilename('Scan.Final.JPEG')).toEqual({
      extension: '.jpeg',
      contentType: 'image/jpeg',
    });
    expect(parseFilename('notes.txt').contentType).toBe('text/plain');
  });

  it('refuses extensions outside the spec table and names without one', () => {
    for (const filename of ['report.docx', 'README', '.png', 'archive.png.', 'clip.mp4']) {
      expect(codeOf(filename)).toBe('INVALID_FORMAT');
    }
  });

  it('takes 1–255 characters, counting characters rather than UTF-16 units', () => {
    expect(codeOf('')).toBe('VALIDATION_ERROR');
    expect(codeOf(`${'a'.repeat(251)}.png`)).toBe('ok');
    expect(codeOf(`${'a'.repeat(252)}.png`)).toBe('VALIDATION_ERROR');
    expect(codeOf(`${'😀'.repeat(251)}.png`)).toBe('ok');
  });
});
