import { keepsInput } from '@tamp/kit';
import type { AudioEncodeOperation } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import type { AudioProbe } from './measurement-parsers';
import { keepInputFacts } from './never-larger';

const mp3: AudioProbe = {
  durationSec: 10,
  sampleRate: 8_000,
  channels: 1,
  codec: 'mp3',
  bitRate: 8_000,
  formatName: 'mp3',
  carriesMetadata: false,
};
const encode = (format: 'opus' | 'mp3' | 'auto', channels = 1): AudioEncodeOperation => ({
  type: 'encode',
  params: { format, bitrate: 24, channels },
});
const job = { input: mp3, processing: [], encode: encode('mp3'), inputSize: 10, outputSize: 30 };

describe('keepInputFacts', () => {
  it('keeps an untagged MP3 re-encoded as MP3 or by auto, the encode alone', () => {
    expect(keepsInput(keepInputFacts(job))).toBe(true);
    expect(keepsInput(keepInputFacts({ ...job, encode: encode('auto') }))).toBe(true);
    // auto chooses its channels itself: a stereo input is still its own answer.
    const stereo = { ...mp3, channels: 2 };
    expect(keepsInput(keepInputFacts({ ...job, input: stereo, encode: encode('auto') }))).toBe(
      true,
    );
  });

  it('not a WAV, another format, other channels asked for, a processed chain or tags', () => {
    const wav = { ...mp3, codec: 'pcm_s16le', formatName: 'wav' };
    expect(keepsInput(keepInputFacts({ ...job, input: wav, encode: encode('auto') }))).toBe(false);
    expect(keepsInput(keepInputFacts({ ...job, encode: encode('opus') }))).toBe(false);
    expect(keepsInput(keepInputFacts({ ...job, encode: encode('mp3', 2) }))).toBe(false);
    const speedup = { type: 'speedup', params: { rate: 1.5 } } as const;
    expect(keepsInput(keepInputFacts({ ...job, processing: [speedup] }))).toBe(false);
    const tagged = { ...mp3, carriesMetadata: true };
    expect(keepsInput(keepInputFacts({ ...job, input: tagged }))).toBe(false);
  });
});
