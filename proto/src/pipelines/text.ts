import { z } from 'zod';
import {
  defineOperation,
  operationSchema,
  type PipelineDefinition,
  type PresetDefinition,
} from './definition';

export const textTrim = defineOperation({
  type: 'trim',
  description:
    'Whitespace, punctuation and unicode cleanup, lossless for meaning. Higher intensity cleans more.',
  params: z.strictObject({
    intensity: z
      .number()
      .int()
      .min(0)
      .max(100)
      .default(50)
      .describe('0 to 100; see the documented bands'),
  }),
});

export const textJsonToToon = defineOperation({
  type: 'json-to-toon',
  description:
    'Converts large JSON blocks to TOON, a tabular notation; blocks too small to benefit are skipped.',
  params: z.strictObject({}),
});

export const textOperationSchema = z.discriminatedUnion('type', [
  operationSchema(textTrim),
  operationSchema(textJsonToToon),
]);
export type TextOperation = z.output<typeof textOperationSchema>;

export const TEXT_PRESET_NAMES = ['chill', 'medium', 'aggressive'] as const;
export type TextPresetName = (typeof TEXT_PRESET_NAMES)[number];

const textPresets: PresetDefinition<TextPresetName>[] = [
  {
    name: 'chill',
    description: 'Light whitespace cleanup',
    operations: [{ type: 'trim', params: { intensity: 30 } }],
    alwaysQueued: false,
  },
  {
    name: 'medium',
    description: 'Whitespace, punctuation and unicode normalization',
    operations: [{ type: 'trim', params: { intensity: 70 } }],
    alwaysQueued: false,
  },
  {
    name: 'aggressive',
    description: 'Strong cleanup plus JSON to TOON',
    operations: [{ type: 'trim', params: { intensity: 80 } }, { type: 'json-to-toon' }],
    alwaysQueued: false,
  },
];

export const textPipeline: PipelineDefinition<TextOperation, TextPresetName> = {
  pipeline: 'text',
  operations: [textTrim, textJsonToToon],
  operationSchema: textOperationSchema,
  presets: textPresets,
  presetNames: TEXT_PRESET_NAMES,
  finalizeChain: (operations) => [...operations],
  describeOutput: () => ({ format: 'text', extension: 'txt' }),
};
