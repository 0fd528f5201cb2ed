import { describe, expect, it } from 'vitest';
import {
  audioOutputFormats,
  audioPipeline,
  describeOperations,
  describePresets,
  expandPreset,
  InvalidChainError,
  imageOutputFormats,
  imagePipeline,
  textPipeline,
} from './index';

/**
 * The spec's tables, written out by hand: if a definition in proto/ drifts from the contract,
 * these fail. Each row is (preset, resolved chain).
 */
describe('audio presets expand to exactly the spec chains', () => {
  const encode = (bitrate: number) => ({
    type: 'encode',
    params: { format: 'opus', bitrate, channels: 1 },
  });
  const trim = (aggressiveness: number) => ({
    type: 'trim-silence',
    params: { aggressiveness, minSilenceDuration: 500 },
  });
  const normalize = (targetLevel: number) => ({
    type: 'normalize',
    params: { targetLevel, peakNormalize: false },
  });
  const compress = (ratio: number) => ({
    type: 'compress',
    params: { ratio, threshold: -20, attack: 10, release: 100 },
  });
  const speedup = (rate: number) => ({ type: 'speedup', params: { rate } });

  it.each([
    ['chill', [trim(0.2), normalize(-16), encode(32)]],
    ['medium', [trim(0.5), normalize(-14), compress(3), encode(24)]],
    ['aggressive', [trim(0.8), speedup(1.75), normalize(-10), compress(8), encode(12)]],
    ['podcast', [trim(0.6), normalize(-16), compress(4), encode(24)]],
    ['lecture', [trim(0.4), speedup(1.5), normalize(-14), encode(16)]],
  ])('%s', (preset, chain) => {
    expect(expandPreset(audioPipeline, preset)).toEqual(chain);
  });

  it('lists exactly the spec presets, all queued, with their output', () => {
    const { presets } = describePresets(audioPipeline);
    expect(presets.map((preset) => preset.name)).toEqual([
      'chill',
      'medium',
      'aggressive',
      'podcast',
      'lecture',
    ]);
    expect(presets.every((preset) => preset.queued)).toBe(true);
    expect(presets[0]?.output).toEqual({
      format: 'opus',
      bitrate: 32,
      channels: 1,
      extension: 'ogg',
    });
  });
});

describe('image presets expand to exactly the spec chains', () => {
  it.each([
    ['chill', [{ type: 'encode', params: { format: 'webp', quality: 85, effort: 4 } }], false],
    [
      'medium',
      [
        {
          type: 'resize',
          params: { width: 2560, height: 2560, fit: 'inside', position: 'centre' },
        },
        { type: 'encode', params: { format: 'webp', quality: 80, effort: 4 } },
      ],
      false,
    ],
    [
      'aggressive',
      [
        {
          type: 'resize',
          params: { width: 2048, height: 2048, fit: 'inside', position: 'centre' },
        },
        { type: 'encode', params: { format: 'avif', quality: 50, effort: 2 } },
      ],
      true,
    ],
    [
      'thumbnail',
      [
        {
          type: 'resize',
          params: { width: 512, height: 512, fit: 'cover', position: 'attention' },
        },
        { type: 'encode', params: { format: 'webp', quality: 75, effort: 4 } },
      ],
      false,
    ],
  ])('%s', (preset, chain, queued) => {
    expect(expandPreset(imagePipeline, preset)).toEqual(chain);
    expect(
      describePresets(imagePipeline).presets.find((entry) => entry.name === preset)?.queued,
    ).toBe(queued);
  });
});

describe('text presets expand to exactly the spec chains', () => {
  it.each([
    ['chill', [{ type: 'trim', params: { intensity: 30 } }]],
    ['medium', [{ type: 'trim', params: { intensity: 70 } }]],
    [
      'aggressive',
      [
        { type: 'trim', params: { intensity: 80 } },
        { type: 'json-to-toon', params: {} },
      ],
    ],
  ])('%s', (preset, chain) => {
    expect(expandPreset(textPipeline, preset)).toEqual(chain);
  });
});

describe('operation tables match the spec (ranges and defaults)', () => {
  const table = (definition: Parameters<typeof describeOperations>[0]) =>
    Object.fromEntries(
      describeOperations(definition).operations.map((operation) => [
        operation.type,
        Object.fromEntries(
          Object.entries(operation.params).map(([name, param]) => [
            name,
            [param.min, param.max, param.default, param.enum].filter(
              (value) => value !== undefined,
            ),
          ]),
        ),
      ]),
    );

  it('audio', () => {
    expect(table(audioPipeline)).toEqual({
      'trim-silence': { aggressiveness: [0, 1, 0.5], minSilenceDuration: [100, 5000, 500] },
      normalize: { targetLevel: [-70, 0, -14], peakNormalize: [false] },
      compress: {
        ratio: [1, 20, 4],
        threshold: [-60, 0, -20],
        attack: [0, 100, 10],
        release: [0, 1000, 100],
      },
      speedup: { rate: [0.5, 5, 1.25] },
      encode: {
        format: ['opus', ['opus', 'mp3', 'auto']],
        bitrate: [12, 128, 24],
        channels: [1, 2, 1],
      },
    });
  });

  it('image', () => {
    expect(table(imagePipeline)).toEqual({
      resize: {
        width: [16, 8192],
        height: [16, 8192],
        fit: ['inside', ['inside', 'cover', 'contain']],
        position: ['centre', ['centre', 'attention', 'entropy']],
      },
      encode: {
        format: ['webp', ['webp', 'avif', 'jpeg', 'png', 'auto']],
        quality: [1, 100, 80],
        effort: [0, 9, 4],
        ssim: [0.8, 0.995],
        accept: [],
      },
    });
  });

  it('text', () => {
    expect(table(textPipeline)).toEqual({ trim: { intensity: [0, 100, 50] }, 'json-to-toon': {} });
  });
});

describe('validation and chain rules', () => {
  const parse = (operation: unknown) => imagePipeline.operationSchema.safeParse(operation);

  it('fills defaults when params are omitted', () => {
    expect(audioPipeline.operationSchema.parse({ type: 'speedup' })).toEqual({
      type: 'speedup',
      params: { rate: 1.25 },
    });
  });

  it('rejects out-of-range values, unknown params and unknown operations', () => {
    expect(parse({ type: 'encode', params: { quality: 0 } }).success).toBe(false);
    expect(parse({ type: 'encode', params: { quality: 101 } }).success).toBe(false);
    expect(parse({ type: 'encode', params: { quality: 80.5 } }).success).toBe(false);
    expect(parse({ type: 'resize', params: { width: 15 } }).success).toBe(false);
    expect(parse({ type: 'resize', params: { width: 8193 } }).success).toBe(false);
    expect(parse({ type: 'resize', params: { width: 100, colour: 'red' } }).success).toBe(false);
    expect(parse({ type: 'rotate' }).success).toBe(false);
    expect(
      audioPipeline.operationSchema.safeParse({ type: 'speedup', params: { rate: 5.01 } }).success,
    ).toBe(false);
  });

  it('requires width or height for resize', () => {
    expect(parse({ type: 'resize', params: { fit: 'cover' } }).success).toBe(false);
    expect(parse({ type: 'resize' }).success).toBe(false);
    expect(parse({ type: 'resize', params: { height: 300 } }).success).toBe(true);
  });

  it('appends the default encode, moves encode last, and lets the last encode win', () => {
    const resize = parse({ type: 'resize', params: { width: 100 } }).data!;
    const png = parse({ type: 'encode', params: { format: 'png' } }).data!;
    const jpeg = parse({ type: 'encode', params: { format: 'jpeg', quality: 60 } }).data!;
    expect(imagePipeline.finalizeChain([resize])).toEqual([
      resize,
      { type: 'encode', params: { format: 'webp', quality: 80, effort: 4 } },
    ]);
    expect(imagePipeline.finalizeChain([png, resize, jpeg])).toEqual([resize, jpeg]);
    const speed = audioPipeline.operationSchema.parse({ type: 'speedup' });
    expect(audioPipeline.finalizeChain([speed])).toEqual([
      speed,
      { type: 'encode', params: { format: 'opus', bitrate: 24, channels: 1 } },
    ]);
  });

  it('accepts a resolved chain only with exactly one encode, last, and splits it there', () => {
    const resize = parse({ type: 'resize', params: { width: 100 } }).data!;
    const encode = parse({ type: 'encode' }).data!;
    const chain = imagePipeline.chainSchema;
    expect(chain.safeParse([resize, encode]).success).toBe(true);
    expect(chain.safeParse([resize]).success).toBe(false);
    expect(chain.safeParse([encode, resize, encode]).success).toBe(false);
    expect(chain.safeParse([]).success).toBe(false);
    expect(chain.safeParse([{ type: 'resize', params: { width: 9000 } }, encode]).success).toBe(
      false,
    );
    expect(imagePipeline.splitChain([resize, resize, encode])).toEqual({
      processing: [resize, resize],
      encode,
    });
    expect(() => imagePipeline.splitChain([encode, encode])).toThrow(InvalidChainError);
    const speed = audioPipeline.operationSchema.parse({ type: 'speedup' });
    expect(() => audioPipeline.splitChain([speed])).toThrow(InvalidChainError);
  });

  it('takes auto with an accept list, and an ssim target with any format', () => {
    expect(
      parse({ type: 'encode', params: { format: 'auto', accept: ['webp', 'avif'], ssim: 0.95 } })
        .data,
    ).toEqual({
      type: 'encode',
      params: { format: 'auto', quality: 80, effort: 4, accept: ['webp', 'avif'], ssim: 0.95 },
    });
    expect(parse({ type: 'encode', params: { format: 'jpeg', ssim: 0.8 } }).success).toBe(true);
    expect(parse({ type: 'encode', params: { format: 'png', ssim: 0.995 } }).success).toBe(true);
  });

  it('refuses accept without auto, a repeated or unknown format in it, and ssim out of range', () => {
    const issues = (params: Record<string, unknown>) =>
      parse({ type: 'encode', params }).error?.issues.map((issue) => [
        issue.path.join('.'),
        issue.message,
      ]);
    expect(issues({ format: 'webp', accept: ['webp'] })).toEqual([
      ['params.accept', 'accept is valid only with format auto'],
    ]);
    expect(issues({ accept: ['webp'] })).toEqual([
      ['params.accept', 'accept is valid only with format auto'],
    ]);
    expect(issues({ format: 'auto', accept: ['webp', 'webp'] })).toEqual([
      ['params.accept', 'accept lists each format once'],
    ]);
    for (const params of [
      { format: 'auto', accept: [] },
      { format: 'auto', accept: ['gif'] },
      { format: 'auto', accept: 'webp' },
      { format: 'auto', ssim: 0.79 },
      { format: 'auto', ssim: 0.996 },
      { format: 'auto', ssim: '0.9' },
      { format: 'heic' },
    ]) {
      expect(parse({ type: 'encode', params }).success, JSON.stringify(params)).toBe(false);
    }
  });

  it('describes an auto output without an extension (it is known once chosen)', () => {
    const auto = parse({ type: 'encode', params: { format: 'auto' } }).data!;
    expect(imagePipeline.describeOutput([auto])).toEqual({
      format: 'auto',
      quality: 80,
      effort: 4,
    });
    expect(imageOutputFormats({ format: 'auto' })).toEqual(['webp', 'avif', 'jpeg', 'png']);
    expect(imageOutputFormats({ format: 'auto', accept: ['jpeg'] })).toEqual(['jpeg']);
    expect(imageOutputFormats({ format: 'png' })).toEqual(['png']);
  });

  it('takes audio auto without bitrate or channels, which the worker chooses', () => {
    const audio = (params: Record<string, unknown>) =>
      audioPipeline.operationSchema.safeParse({ type: 'encode', params });
    const auto = audio({ format: 'auto' }).data!;
    expect(auto).toEqual({ type: 'encode', params: { format: 'auto', bitrate: 24, channels: 1 } });
    expect(audioPipeline.describeOutput([auto])).toEqual(auto.params);
    expect(audio({ format: 'auto', bitrate: 64, channels: 2 }).error?.issues).toEqual([
      expect.objectContaining({
        path: ['params', 'bitrate'],
        message: 'with format auto the worker chooses bitrate; leave it out',
      }),
      expect.objectContaining({
        path: ['params', 'channels'],
        message: 'with format auto the worker chooses channels; leave it out',
      }),
    ]);
    expect(audio({ format: 'mp3', bitrate: 64, channels: 2 }).success).toBe(true);
    expect(audioOutputFormats({ format: 'auto' })).toEqual(['opus', 'mp3']);
    expect(audioOutputFormats({ format: 'opus' })).toEqual(['opus']);
  });

  it('leaves text chains as given (text has no encode)', () => {
    const trim = textPipeline.operationSchema.parse({ type: 'trim' });
    expect(textPipeline.finalizeChain([trim, trim])).toEqual([trim, trim]);
  });
});
