import type { AudioOperation } from '@tamp/proto';

/** Builders for resolved operations with the spec's defaults, for tests. */
export const op = {
  trimSilence: (aggressiveness = 0.5, minSilenceDuration = 500): AudioOperation => ({
    type: 'trim-silence',
    params: { aggressiveness, minSilenceDuration },
  }),
  normalize: (targetLevel = -14, peakNormalize = false): AudioOperation => ({
    type: 'normalize',
    params: { targetLevel, peakNormalize },
  }),
  compress: (ratio = 4, threshold = -20, attack = 10, release = 100): AudioOperation => ({
    type: 'compress',
    params: { ratio, threshold, attack, release },
  }),
  speedup: (rate = 1.25): AudioOperation => ({ type: 'speedup', params: { rate } }),
  encode: (format: 'opus' | 'mp3' = 'opus', bitrate = 24, channels = 1): AudioOperation => ({
    type: 'encode',
    params: { format, bitrate, channels },
  }),
};

/**
 * The spec's audio presets (POST /v1/audio) expanded the way the gateway will expand them:
 * unnamed parameters take their defaults, the preset's output becomes the encode.
 */
export const SPEC_PRESET_CHAINS: Record<string, AudioOperation[]> = {
  chill: [op.trimSilence(0.2), op.normalize(-16), op.encode('opus', 32)],
  medium: [op.trimSilence(0.5), op.normalize(-14), op.compress(3), op.encode('opus', 24)],
  aggressive: [
    op.trimSilence(0.8),
    op.speedup(1.75),
    op.normalize(-10),
    op.compress(8),
    op.encode('opus', 12),
  ],
  podcast: [op.trimSilence(0.6), op.normalize(-16), op.compress(4), op.encode('opus', 24)],
  lecture: [op.trimSilence(0.4), op.speedup(1.5), op.normalize(-14), op.encode('opus', 16)],
};
