import { z } from 'zod';
import {
  defineOperation,
  type PipelineDefinition,
  type PresetDefinition,
  pipelineOperations,
  preset,
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

/**
 * What "large" and "benefit" mean for json-to-toon: a block is rewritten only when its compact
 * JSON costs at least `minBlockTokens` o200k tokens and TOON saves at least `minSavedTokens`
 * and `minSavedShare` of them. Below that the saving is a token or two, not worth changing JSON
 * a reader wrote, and the block is kept byte for byte.
 */
export const JSON_TO_TOON_THRESHOLDS = {
  minBlockTokens: 40,
  minSavedTokens: 10,
  minSavedShare: 0.1,
} as const;

export const textJsonToToon = defineOperation({
  type: 'json-to-toon',
  description: `Converts large JSON blocks to TOON, a tabular notation; blocks too small to benefit are kept byte for byte (a block converts when its compact JSON is at least ${JSON_TO_TOON_THRESHOLDS.minBlockTokens} tokens and TOON saves at least ${JSON_TO_TOON_THRESHOLDS.minSavedTokens} tokens and ${JSON_TO_TOON_THRESHOLDS.minSavedShare * 100} %).`,
  params: z.strictObject({}),
});

const textOperations = pipelineOperations(textTrim, textJsonToToon);
export const textOperationSchema = textOperations.operationSchema;
export type TextOperation = z.output<typeof textOperationSchema>;

export const TEXT_PRESET_NAMES = ['chill', 'medium', 'aggressive'] as const;
export type TextPresetName = (typeof TEXT_PRESET_NAMES)[number];

const trim = (intensity: number) => ({ type: 'trim', params: { intensity } });

const textPresets: PresetDefinition<TextPresetName>[] = [
  preset('chill', 'Light whitespace cleanup', [trim(30)]),
  preset('medium', 'Whitespace, punctuation and unicode normalization', [trim(70)]),
  preset('aggressive', 'Strong cleanup plus JSON to TOON', [trim(80), { type: 'json-to-toon' }]),
];

export const textPipeline: PipelineDefinition<TextOperation, TextPresetName> = {
  pipeline: 'text',
  ...textOperations,
  presets: textPresets,
  presetNames: TEXT_PRESET_NAMES,
  finalizeChain: (operations) => [...operations],
  describeOutput: () => ({ format: 'text', extension: 'txt' }),
};
