import {
  AUDIO_EXTENSIONS,
  AUTO_AUDIO_FORMAT,
  type AudioEncodeOperation,
  type AudioFormat,
} from '@tamp/proto';

export interface EncoderSettings {
  format: AudioFormat;
  /** File extension of the output, without the dot (proto's, for the format). */
  extension: (typeof AUDIO_EXTENSIONS)[AudioFormat];
  codec: 'libopus' | 'libmp3lame';
  bitrateKbps: number;
  channels: 1 | 2;
  /** The whole filter chain runs at this rate so nothing is resampled twice. */
  sampleRate: number;
  /** Encoder-specific ffmpeg output options (after the common ones). */
  codecOptions: readonly string[];
}

/** Below this bitrate Opus is tuned for speech intelligibility rather than fidelity. */
const OPUS_VOIP_BELOW_KBPS = 48;

/**
 * Opus always runs at 48 kHz internally; feeding it anything else only adds a resampler.
 * MP3 at low bitrates must drop to the MPEG-2 sample rates (16–24 kHz): MPEG-1 Layer III
 * has no bitrate below 32 kbit/s, and squeezing 44.1 kHz into few bits sounds worse than
 * a narrower band coded cleanly.
 */
export function mp3SampleRate(bitrateKbps: number, channels: 1 | 2): number {
  const perChannel = bitrateKbps / channels;
  if (perChannel < 24) return 16_000;
  if (perChannel < 40) return 22_050;
  if (perChannel < 64) return 32_000;
  return 44_100;
}

/** Opus' `-application` for a bitrate: speech intelligibility below 48 kbit/s, fidelity from 48. */
export function opusApplication(bitrateKbps: number): 'voip' | 'audio' {
  return bitrateKbps < OPUS_VOIP_BELOW_KBPS ? 'voip' : 'audio';
}

export function encoderSettings(encode: AudioEncodeOperation): EncoderSettings {
  if (encode.params.format === AUTO_AUDIO_FORMAT) {
    throw new TypeError('an auto encode is resolved (chosenEncode) before it is planned');
  }
  const channels = encode.params.channels === 2 ? 2 : 1;
  const bitrateKbps = Math.round(encode.params.bitrate);
  if (encode.params.format === 'mp3') {
    return {
      format: 'mp3',
      extension: AUDIO_EXTENSIONS.mp3,
      codec: 'libmp3lame',
      bitrateKbps,
      channels,
      sampleRate: mp3SampleRate(bitrateKbps, channels),
      // libmp3lame with -b:a is constant bitrate: the size a user picks is the size they get.
      codecOptions: [],
    };
  }
  return {
    format: 'opus',
    extension: AUDIO_EXTENSIONS.opus,
    codec: 'libopus',
    bitrateKbps,
    channels,
    sampleRate: 48_000,
    // Constrained VBR: unconstrained VBR overshoots by up to 80 % on tonal speech at 64 kbit/s
    // (measured on espeak speech), and a user who picks a bitrate expects that file size.
    codecOptions: ['-application', opusApplication(bitrateKbps), '-vbr', 'constrained'],
  };
}
