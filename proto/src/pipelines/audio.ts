import { z } from 'zod';
import { defineOperation, encodedPipeline, type PresetDefinition, preset } from './definition';

export const audioTrimSilence = defineOperation({
  type: 'trim-silence',
  description:
    'Removes silences longer than minSilenceDuration; higher aggressiveness treats louder passages as silence.',
  params: z.strictObject({
    aggressiveness: z
      .number()
      .min(0)
      .max(1)
      .default(0.5)
      .describe('0 removes only near-digital silence, 1 removes quiet room noise too'),
    minSilenceDuration: z
      .number()
      .int()
      .min(100)
      .max(5000)
      .default(500)
      .describe('Shortest silence removed, in milliseconds'),
  }),
});

export const audioNormalize = defineOperation({
  type: 'normalize',
  description:
    'Normalizes integrated loudness to targetLevel LUFS, or the peak level to targetLevel dBFS with peakNormalize.',
  params: z.strictObject({
    targetLevel: z
      .number()
      .min(-70)
      .max(0)
      .default(-14)
      .describe('Target level in dB (LUFS, or dBFS with peakNormalize)'),
    peakNormalize: z
      .boolean()
      .default(false)
      .describe('Normalize the peak level instead of loudness'),
  }),
});

export const audioCompress = defineOperation({
  type: 'compress',
  description: 'Dynamic range compression.',
  params: z.strictObject({
    ratio: z.number().min(1).max(20).default(4).describe('Compression ratio, N:1'),
    threshold: z.number().min(-60).max(0).default(-20).describe('Threshold in dB'),
    attack: z.number().min(0).max(100).default(10).describe('Attack in milliseconds'),
    release: z.number().min(0).max(1000).default(100).describe('Release in milliseconds'),
  }),
});

export const audioSpeedup = defineOperation({
  type: 'speedup',
  description: 'Changes speed without changing pitch.',
  params: z.strictObject({
    rate: z.number().min(0.5).max(5).default(1.25).describe('Playback rate, 0.5 to 5.0'),
  }),
});

/** Each output format and the extension its result is stored under. */
export const AUDIO_EXTENSIONS = { opus: 'ogg', mp3: 'mp3' } as const;
export type AudioFormat = keyof typeof AUDIO_EXTENSIONS;
export const AUDIO_FORMATS = Object.keys(AUDIO_EXTENSIONS) as [AudioFormat, ...AudioFormat[]];

/** The encode's `format` that lets the worker choose the encoding per input. */
export const AUTO_AUDIO_FORMAT = 'auto';

/** What auto hears an input as (services/worker-audio/README.md#auto). */
export const AUDIO_CLASSES = ['speech', 'music'] as const;
export type AudioClass = (typeof AUDIO_CLASSES)[number];

/**
 * What auto encodes each class as, always Opus: speech mono at the spec's podcast rate (Opus
 * `voip` below 48 kbit/s); music at Opus' `audio` rates, stereo only when the input's channels
 * differ (an input whose channels carry the same signal is encoded mono).
 */
export const AUDIO_AUTO_ENCODINGS = {
  speech: { bitrate: 24, channels: 1 },
  musicMono: { bitrate: 48, channels: 1 },
  musicStereo: { bitrate: 64, channels: 2 },
} as const;

const AUDIO_ENCODE_DEFAULTS = { bitrate: 24, channels: 1 } as const;

const audioEncode = {
  description:
    'Encodes the output; always runs last. Default Opus in Ogg, 24 kbps, mono. `auto` hears whether the input ' +
    `is speech or music and encodes Opus for it: speech ${AUDIO_AUTO_ENCODINGS.speech.bitrate} kbps mono (voip), ` +
    `music ${AUDIO_AUTO_ENCODINGS.musicStereo.bitrate} kbps stereo or ${AUDIO_AUTO_ENCODINGS.musicMono.bitrate} kbps ` +
    'mono (audio); never larger than the input.',
  extensions: AUDIO_EXTENSIONS,
  defaultFormat: 'opus',
  chosenFormat: {
    name: AUTO_AUDIO_FORMAT,
    description:
      'Opus chosen per input, or the input MP3 itself when nothing smaller comes out; the result names the format and its extension',
  },
  params: {
    bitrate: z
      .number()
      .int()
      .min(12)
      .max(128)
      .default(AUDIO_ENCODE_DEFAULTS.bitrate)
      .describe('Bitrate in kbps; chosen by the worker with auto'),
    channels: z
      .number()
      .int()
      .min(1)
      .max(2)
      .default(AUDIO_ENCODE_DEFAULTS.channels)
      .describe('1 (mono) or 2 (stereo); chosen by the worker with auto'),
  },
  // auto chooses bitrate and channels itself: a value other than the default would be ignored,
  // so it is refused rather than dropped silently (the defaults cannot be told from omission).
  check: (params: Record<string, unknown>) =>
    params.format !== AUTO_AUDIO_FORMAT
      ? []
      : (['bitrate', 'channels'] as const)
          .filter((name) => params[name] !== AUDIO_ENCODE_DEFAULTS[name])
          .map((name) => ({
            path: name,
            message: `with format auto the worker chooses ${name}; leave it out`,
          })),
} as const;

/**
 * The formats an audio encode may answer with: its format, or for auto Opus and the input's own
 * MP3 (kept when nothing smaller comes out, docs/decisions.md#never-larger-than-the-input).
 */
export function audioOutputFormats(params: { format: string }): readonly AudioFormat[] {
  if (params.format === AUTO_AUDIO_FORMAT) return AUDIO_FORMATS;
  return [params.format as AudioFormat];
}

export type AudioOperation = z.output<typeof audioOperationSchema>;
export type AudioEncodeOperation = Extract<AudioOperation, { type: 'encode' }>;

export const AUDIO_PRESET_NAMES = ['chill', 'medium', 'aggressive', 'podcast', 'lecture'] as const;
export type AudioPresetName = (typeof AUDIO_PRESET_NAMES)[number];

const trimSilence = (aggressiveness: number) => ({
  type: 'trim-silence',
  params: { aggressiveness },
});
const normalize = (targetLevel: number) => ({ type: 'normalize', params: { targetLevel } });
const compress = (ratio: number) => ({ type: 'compress', params: { ratio } });
const speedup = (rate: number) => ({ type: 'speedup', params: { rate } });
const opus = (bitrate: number) => ({ type: 'encode', params: { format: 'opus', bitrate } });
/** Audio is never processed inline. */
const queued = (
  name: AudioPresetName,
  description: string,
  operations: PresetDefinition<AudioPresetName>['operations'],
) => preset(name, description, operations, true);

const audioPresets: PresetDefinition<AudioPresetName>[] = [
  queued('chill', 'Light silence trim, loudness to -16 LUFS, Opus 32 kbps', [
    trimSilence(0.2),
    normalize(-16),
    opus(32),
  ]),
  queued('medium', 'Silence trim, loudness to -14 LUFS, 3:1 compression, Opus 24 kbps', [
    trimSilence(0.5),
    normalize(-14),
    compress(3),
    opus(24),
  ]),
  queued(
    'aggressive',
    'Hard silence trim, 1.75× speed, loudness to -10 LUFS, 8:1 compression, Opus 12 kbps',
    [trimSilence(0.8), speedup(1.75), normalize(-10), compress(8), opus(12)],
  ),
  queued('podcast', 'Silence trim, loudness to -16 LUFS, 4:1 compression, Opus 24 kbps', [
    trimSilence(0.6),
    normalize(-16),
    compress(4),
    opus(24),
  ]),
  queued('lecture', 'Silence trim, 1.5× speed, loudness to -14 LUFS, Opus 16 kbps', [
    trimSilence(0.4),
    speedup(1.5),
    normalize(-14),
    opus(16),
  ]),
];

export const audioPipeline = encodedPipeline({
  pipeline: 'audio',
  operations: [audioTrimSilence, audioNormalize, audioCompress, audioSpeedup],
  encode: audioEncode,
  presets: audioPresets,
  presetNames: AUDIO_PRESET_NAMES,
});
export const audioOperationSchema = audioPipeline.operationSchema;

export const audioEncodeOf = audioPipeline.encodeOf;
export const audioChainSchema = audioPipeline.chainSchema;
export const splitAudioChain = audioPipeline.splitChain;
