import type { UploadExtension } from '@tamp/proto';

/** A file format recognised from its leading bytes. */
export type ContentFormat = 'mp3' | 'wav' | 'pdf' | 'jpeg' | 'png' | 'webp';

/** Enough leading bytes for every signature below (WebP needs 12, an ID3v2 header 10). */
export const SIGNATURE_HEAD_BYTES = 16;

/**
 * Formats whose signature satisfies an extension (docs/decisions.md#uploads: an audio extension needs an MP3
 * or WAV signature, an image extension a JPEG/PNG/WebP one, `.pdf` a PDF one). The workers
 * decode by content (ffmpeg and sharp probe the bytes), so a `.mp3` holding WAV bytes is still a
 * processable audio file. `null`: the kind has no signature; plain text skips the check.
 */
export const ACCEPTED_FORMATS: Record<UploadExtension, readonly ContentFormat[] | null> = {
  '.mp3': ['mp3', 'wav'],
  '.wav': ['mp3', 'wav'],
  '.jpg': ['jpeg', 'png', 'webp'],
  '.jpeg': ['jpeg', 'png', 'webp'],
  '.png': ['jpeg', 'png', 'webp'],
  '.webp': ['jpeg', 'png', 'webp'],
  '.pdf': ['pdf'],
  '.txt': null,
};

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** Recognises the format of a file from its first bytes, or undefined when none matches. */
export function detectFormat(head: Uint8Array): ContentFormat | undefined {
  if (startsWith(head, PNG_SIGNATURE)) return 'png';
  if (startsWith(head, [0xff, 0xd8, 0xff])) return 'jpeg';
  if (startsWith(head, ascii('%PDF-'))) return 'pdf';
  if (startsWith(head, ascii('RIFF'))) {
    // RIFF container: 4 bytes "RIFF", 4 bytes little-endian size, then the form type.
    if (startsWith(head, ascii('WAVE'), 8)) return 'wav';
    if (startsWith(head, ascii('WEBP'), 8)) return 'webp';
    return undefined;
  }
  if (isId3v2Header(head) || isMpegAudioLayer3Frame(head)) return 'mp3';
  return undefined;
}

/**
 * "ID3", a major version (2, 3 or 4) and a revision (never 0xFF), a flags byte whose low four
 * bits are unused, then a 28-bit size written as four bytes whose top bit is always clear.
 * Checking the whole header keeps plain text that happens to begin with "ID3" from passing.
 */
function isId3v2Header(head: Uint8Array): boolean {
  const [, , , major, revision, flags] = head;
  if (head.length < 10 || !startsWith(head, ascii('ID3'))) return false;
  if (major === undefined || major < 2 || major > 4 || revision === 0xff) return false;
  if (flags === undefined || (flags & 0x0f) !== 0) return false;
  return [6, 7, 8, 9].every((index) => (head[index] ?? 0x80) < 0x80);
}

/**
 * An MPEG audio frame header: 11 set sync bits, then version, layer, bitrate and sample-rate
 * fields. Only Layer III is MP3 (ADTS AAC shares the sync word with layer bits 00), and the
 * reserved version, the "bad" bitrate index and the reserved sample rate are refused, so
 * arbitrary 0xFF-leading bytes rarely pass.
 */
function isMpegAudioLayer3Frame(head: Uint8Array): boolean {
  const [first, second, third] = head;
  if (first === undefined || second === undefined || third === undefined) return false;
  if (first !== 0xff || (second & 0xe0) !== 0xe0) return false;
  const version = (second >> 3) & 0b11;
  const layer = (second >> 1) & 0b11;
  const bitrateIndex = third >> 4;
  const sampleRateIndex = (third >> 2) & 0b11;
  return version !== 0b01 && layer === 0b01 && bitrateIndex !== 0b1111 && sampleRateIndex !== 0b11;
}

function startsWith(bytes: Uint8Array, expected: readonly number[], offset = 0): boolean {
  if (bytes.length < offset + expected.length) return false;
  return expected.every((value, index) => bytes[offset + index] === value);
}

function ascii(text: string): number[] {
  return [...text].map((character) => character.charCodeAt(0));
}
