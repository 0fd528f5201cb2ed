import { describe, expect, it } from 'vitest';
import { FILE_HEADS, fileOf } from '../../test/support/file-heads';
import { detectFormat } from './signature';

describe('detectFormat', () => {
  it.each([
    ['png', 'png'],
    ['jpeg', 'jpeg'],
    ['webp', 'webp'],
    ['wav', 'wav'],
    ['mp3Id3', 'mp3'],
    ['mp3Frame', 'mp3'],
    ['pdf', 'pdf'],
  ] as const)('recognises %s', (head, format) => {
    expect(detectFormat(fileOf(head))).toBe(format);
  });

  it('recognises nothing in plain text or an empty file', () => {
    expect(detectFormat(fileOf('text'))).toBeUndefined();
    expect(detectFormat(new Uint8Array(0))).toBeUndefined();
  });

  it('needs the whole signature, not a prefix of it', () => {
    expect(detectFormat(FILE_HEADS.png.subarray(0, 7))).toBeUndefined();
    expect(detectFormat(Buffer.from('%PDF'))).toBeUndefined();
    expect(detectFormat(Buffer.from('RIFF\0\0\0\0AVI LIST'))).toBeUndefined();
  });

  it('does not take text that starts with "ID3" for an ID3 tag', () => {
    expect(detectFormat(Buffer.from('ID3 is a metadata container'))).toBeUndefined();
  });

  it('takes only MPEG Layer III frames as MP3', () => {
    // ADTS AAC shares the sync word but has layer bits 00.
    expect(detectFormat(Buffer.from([0xff, 0xf1, 0x50, 0x80]))).toBeUndefined();
    // Reserved MPEG version (01).
    expect(detectFormat(Buffer.from([0xff, 0xeb, 0x90, 0x64]))).toBeUndefined();
    // Bitrate index 1111 is invalid; sample-rate index 11 is reserved.
    expect(detectFormat(Buffer.from([0xff, 0xfb, 0xf0, 0x64]))).toBeUndefined();
    expect(detectFormat(Buffer.from([0xff, 0xfb, 0x9c, 0x64]))).toBeUndefined();
    // MPEG-2 Layer III (lower sample rates) is MP3 too.
    expect(detectFormat(Buffer.from([0xff, 0xf3, 0x40, 0xc4]))).toBe('mp3');
  });
});
