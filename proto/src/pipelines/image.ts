import { z } from 'zod';
import { defineOperation, encodedPipeline, type PresetDefinition, preset } from './definition';

const dimension = z.number().int().min(16).max(8192);

export const imageResize = defineOperation({
  type: 'resize',
  description:
    'Fits the image within width and height (inside, never enlarges), or gives exactly that box by cropping (cover) or letterboxing (contain). A missing dimension follows the aspect ratio.',
  params: z
    .strictObject({
      width: dimension.optional().describe('Target width in pixels'),
      height: dimension.optional().describe('Target height in pixels'),
      fit: z
        .enum(['inside', 'cover', 'contain'])
        .default('inside')
        .describe('How the image fits the box'),
      position: z
        .enum(['centre', 'attention', 'entropy'])
        .default('centre')
        .describe('Where cover crops: the centre, the most interesting region, or the busiest one'),
    })
    .refine((params) => params.width !== undefined || params.height !== undefined, {
      message: 'resize needs at least one of width and height',
    }),
});

/** Each output format and the extension its result is stored under. */
export const IMAGE_EXTENSIONS = { webp: 'webp', avif: 'avif', jpeg: 'jpg', png: 'png' } as const;
export type ImageFormat = keyof typeof IMAGE_EXTENSIONS;
export const IMAGE_FORMATS = Object.keys(IMAGE_EXTENSIONS) as [ImageFormat, ...ImageFormat[]];

/** The encode's `format` that lets the worker choose the format per image. */
export const AUTO_IMAGE_FORMAT = 'auto';

/**
 * The range of a perceptual target (`ssim`): below 0.80 artefacts are plain on any content;
 * above 0.995 no lossy setting is reliably reached and lossless is the honest request.
 */
export const IMAGE_SSIM_TARGET = { min: 0.8, max: 0.995 } as const;

const imageEncode = {
  description:
    'Encodes the output; always runs last. Default WebP, quality 80. `auto` chooses the format per image: ' +
    'the smallest of AVIF, WebP and JPEG (and lossless WebP or PNG for graphics with transparency or few ' +
    'colours) that meets the quality target, never larger than the input.',
  extensions: IMAGE_EXTENSIONS,
  defaultFormat: 'webp',
  chosenFormat: {
    name: AUTO_IMAGE_FORMAT,
    description: 'chosen per image; the result names the format and its extension',
  },
  params: {
    quality: z
      .number()
      .int()
      .min(1)
      .max(100)
      .default(80)
      .describe(
        'Visual quality, 1 to 100. With auto and no ssim, the target is the SSIM a JPEG at this quality reaches on the image',
      ),
    effort: z
      .number()
      .int()
      .min(0)
      .max(9)
      .default(4)
      .describe('CPU effort, 0 (fast) to 9 (smallest)'),
    ssim: z
      .number()
      .min(IMAGE_SSIM_TARGET.min)
      .max(IMAGE_SSIM_TARGET.max)
      .optional()
      .describe(
        `Perceptual target instead of quality, ${IMAGE_SSIM_TARGET.min} to ${IMAGE_SSIM_TARGET.max}: the encoder ` +
          'quality is searched for the smallest output whose SSIM (luma, against the resized input) reaches it; ' +
          'quality is then ignored',
      ),
    accept: z
      .array(z.enum(IMAGE_FORMATS))
      .min(1)
      .max(IMAGE_FORMATS.length)
      .optional()
      .meta({ uniqueItems: true })
      .describe(
        "With auto only: the formats the client can use (e.g. from its browser's Accept header), each once; default all",
      ),
  },
  check: (params: Record<string, unknown>) => {
    const issues: { path: string; message: string }[] = [];
    const accept = params.accept as readonly string[] | undefined;
    if (accept !== undefined && params.format !== AUTO_IMAGE_FORMAT) {
      issues.push({ path: 'accept', message: 'accept is valid only with format auto' });
    }
    if (accept !== undefined && new Set(accept).size !== accept.length) {
      issues.push({ path: 'accept', message: 'accept lists each format once' });
    }
    return issues;
  },
} as const;

export type ImageOperation = z.output<typeof imageOperationSchema>;
export type ImageResizeOperation = Extract<ImageOperation, { type: 'resize' }>;
export type ImageEncodeOperation = Extract<ImageOperation, { type: 'encode' }>;
export type ImageEncodeParams = ImageEncodeOperation['params'];

/**
 * The formats an encode may produce: its format, or for auto the accepted ones (all by
 * default). The creation route reads it (AVIF output is always queued).
 */
export function imageOutputFormats(params: {
  format: string;
  accept?: readonly string[] | undefined;
}): readonly string[] {
  if (params.format !== AUTO_IMAGE_FORMAT) return [params.format];
  return params.accept ?? IMAGE_FORMATS;
}

export const IMAGE_PRESET_NAMES = ['chill', 'medium', 'aggressive', 'thumbnail'] as const;
export type ImagePresetName = (typeof IMAGE_PRESET_NAMES)[number];

const fitInside = (size: number) => ({
  type: 'resize',
  params: { width: size, height: size, fit: 'inside' },
});

const imagePresets: PresetDefinition<ImagePresetName>[] = [
  preset('chill', 'WebP at quality 85, original dimensions', [
    { type: 'encode', params: { quality: 85 } },
  ]),
  preset('medium', 'Fit inside 2560 px, WebP at quality 80', [
    fitInside(2560),
    { type: 'encode', params: { quality: 80 } },
  ]),
  preset(
    'aggressive',
    'Fit inside 2048 px, AVIF at quality 50, effort 2; always queued',
    [fitInside(2048), { type: 'encode', params: { format: 'avif', quality: 50, effort: 2 } }],
    true,
  ),
  preset(
    'thumbnail',
    '512×512 cover crop towards the most interesting region, WebP at quality 75',
    [
      { type: 'resize', params: { width: 512, height: 512, fit: 'cover', position: 'attention' } },
      { type: 'encode', params: { quality: 75 } },
    ],
  ),
];

export const imagePipeline = encodedPipeline({
  pipeline: 'image',
  operations: [imageResize],
  encode: imageEncode,
  presets: imagePresets,
  presetNames: IMAGE_PRESET_NAMES,
});
export const imageOperationSchema = imagePipeline.operationSchema;
export const imageChainSchema = imagePipeline.chainSchema;
export const splitImageChain = imagePipeline.splitChain;
