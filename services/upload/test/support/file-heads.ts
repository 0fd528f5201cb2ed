/** Leading bytes of each format the signature check knows, plus filler, for tests. */
const filler = (length: number) => Buffer.alloc(length, 0x20);

const riff = (form: string, chunk: string) =>
  Buffer.concat([
    Buffer.from('RIFF'),
    Buffer.from([0x24, 0x08, 0x00, 0x00]),
    Buffer.from(form + chunk),
  ]);

export const FILE_HEADS = {
  png: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d]),
  jpeg: Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00]),
  webp: riff('WEBP', 'VP8 '),
  wav: riff('WAVE', 'fmt '),
  /** ID3v2.4 tag header: version 4.0, no flags, syncsafe size 10. */
  mp3Id3: Buffer.from([0x49, 0x44, 0x33, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a]),
  /** MPEG-1 Layer III frame header, 128 kbps, 44.1 kHz. */
  mp3Frame: Buffer.from([0xff, 0xfb, 0x90, 0x64]),
  pdf: Buffer.from('%PDF-1.7\n%âãÏÓ\n'),
  text: Buffer.from('Hello, this is just some text.\n'),
};

export type FileHead = keyof typeof FILE_HEADS;

/** A file of `size` bytes (at least the head) starting with the given format's head. */
export function fileOf(format: FileHead, size = 64): Buffer {
  const head = FILE_HEADS[format];
  return Buffer.concat([head, filler(Math.max(0, size - head.length))]);
}
