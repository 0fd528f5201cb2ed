import { z } from 'zod';
import {
  defineOperation,
  operationSchema,
  type PipelineDefinition,
  type PresetDefinition,
  placeEncodeLast,
} from './definition';

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

export const AUDIO_FORMATS = ['opus', 'mp3'] as const;
export type AudioFormat = (typeof AUDIO_FORMATS)[number];
export const AUDIO_EXTENSIONS: Record<AudioFormat, string> = { opus: 'ogg', mp3: 'mp3' };

export const audioEncode = defineOperation({
  type: 'encode',
  description: 'Encodes the output; always runs last. Default Opus in Ogg, 24 kbps, mono.',
  params: z.strictObject({
    format: z.enum(AUDIO_FORMATS).default('opus').describe('opus (.ogg) or mp3 (.mp3)'),
    bitrate: z.number().int().min(12).max(128).default(24).describe('Bitrate in kbps'),
    channels: z.number().int().min(1).max(2).default(1).describe('1 (mono) or 2 (stereo)'),
  }),
});

export const audioOperationSchema = z.discriminatedUnion('type', [
  operationSchema(audioTrimSilence),
  operationSchema(audioNormalize),
  operationSchema(audioCompress),
  operationSchema(audioSpeedup),
  operationSchema(audioEncode),
]);
export type AudioOperation = z.output<typeof audioOperationSchema>;
export type AudioEncodeOperation = Extract<AudioOperation, { type: 'encode' }>;

export const AUDIO_PRESET_NAMES = ['chill', 'medium', 'aggressive', 'podcast', 'lecture'] as const;
export type AudioPresetName = (typeof AUDIO_PRESET_NAMES)[number];

const opus = (bitrate: number) => ({ type: 'encode', params: { format: 'opus', bitrate } });

const audioPresets: PresetDefinition<AudioPresetName>[] = [
  {
    name: 'chill',
    description: 'Light silence trim, loudness to -16 LUFS, Opus 32 kbps',
    operations: [
      { type: 'trim-silence', params: { aggressiveness: 0.2 } },
      { type: 'normalize', params: { targetLevel: -16 } },
      opus(32),
    ],
    alwaysQueued: true,
  },
  {
    name: 'medium',
    description: 'Silence trim, loudness to -14 LUFS, 3:1 compression, Opus 24 kbps',
    operations: [
      { type: 'trim-silence', params: { aggressiveness: 0.5 } },
      { type: 'normalize', params: { targetLevel: -14 } },
      { type: 'compress', params: { ratio: 3 } },
      opus(24),
    ],
    alwaysQueued: true,
  },
  {
    name: 'aggressive',
    description:
      'Hard silence trim, 1.75× speed, loudness to -10 LUFS, 8:1 compression, Opus 12 kbps',
    operations: [
      { type: 'trim-silence', params: { aggressiveness: 0.8 } },
      { type: 'speedup', params: { rate: 1.75 } },
      { type: 'normalize', params: { targetLevel: -10 } },
      { type: 'compress', params: { ratio: 8 } },
      opus(12),
    ],
    alwaysQueued: true,
  },
  {
    name: 'podcast',
    description: 'Silence trim, loudness to -16 LUFS, 4:1 compression, Opus 24 kbps',
    operations: [
      { type: 'trim-silence', params: { aggressiveness: 0.6 } },
      { type: 'normalize', params: { targetLevel: -16 } },
      { type: 'compress', params: { ratio: 4 } },
      opus(24),
    ],
    alwaysQueued: true,
  },
  {
    name: 'lecture',
    description: 'Silence trim, 1.5× speed, loudness to -14 LUFS, Opus 16 kbps',
    operations: [
      { type: 'trim-silence', params: { aggressiveness: 0.4 } },
      { type: 'speedup', params: { rate: 1.5 } },
      { type: 'normalize', params: { targetLevel: -14 } },
      opus(16),
    ],
    alwaysQueued: true,
  },
];

export const DEFAULT_AUDIO_ENCODE: AudioEncodeOperation = audioOperationSchema.parse({
  type: 'encode',
}) as AudioEncodeOperation;

export function audioEncodeOf(chain: readonly AudioOperation[]): AudioEncodeOperation {
  const encode = chain.at(-1);
  if (encode?.type !== 'encode') throw new Error('an audio chain always ends with encode');
  return encode;
}

export const audioPipeline: PipelineDefinition<AudioOperation, AudioPresetName> = {
  pipeline: 'audio',
  operations: [audioTrimSilence, audioNormalize, audioCompress, audioSpeedup, audioEncode],
  operationSchema: audioOperationSchema,
  presets: audioPresets,
  presetNames: AUDIO_PRESET_NAMES,
  finalizeChain: (operations) => placeEncodeLast(operations, DEFAULT_AUDIO_ENCODE),
  describeOutput: (chain) => {
    const { format, bitrate, channels } = audioEncodeOf(chain).params;
    return { format, bitrate, channels, extension: AUDIO_EXTENSIONS[format] };
  },
};
