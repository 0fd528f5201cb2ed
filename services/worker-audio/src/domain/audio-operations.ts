/**
 * The resolved audio operation chain as the worker receives it: presets already expanded,
 * every parameter filled with its default, exactly one `encode` at the end.
 *
 * Shape mirrors the public spec (POST /v1/audio). A shared definition will come from
 * `@tamp/proto`; until then this is the local source of truth for the processing core.
 */

export interface TrimSilenceOperation {
  type: 'trim-silence';
  params: {
    /** 0 (gentle) – 1 (aggressive). */
    aggressiveness: number;
    /** Milliseconds, 100–5000: only silences longer than this are shortened. */
    minSilenceDuration: number;
  };
}

export interface NormalizeOperation {
  type: 'normalize';
  params: {
    /** -70–0. LUFS (integrated loudness) or, with peakNormalize, dBFS sample peak. */
    targetLevel: number;
    peakNormalize: boolean;
  };
}

export interface CompressOperation {
  type: 'compress';
  params: {
    /** 1–20 (n:1). */
    ratio: number;
    /** dBFS, -60–0. */
    threshold: number;
    /** Milliseconds, 0–100. */
    attack: number;
    /** Milliseconds, 0–1000. */
    release: number;
  };
}

export interface SpeedupOperation {
  type: 'speedup';
  params: {
    /** Tempo factor 0.5–5.0; pitch is preserved. */
    rate: number;
  };
}

export type AudioOutputFormat = 'opus' | 'mp3';

export interface EncodeOperation {
  type: 'encode';
  params: {
    format: AudioOutputFormat;
    /** kbit/s, 12–128. */
    bitrate: number;
    /** 1 or 2. */
    channels: number;
  };
}

export type ProcessingOperation =
  | TrimSilenceOperation
  | NormalizeOperation
  | CompressOperation
  | SpeedupOperation;

export type ResolvedAudioOperation = ProcessingOperation | EncodeOperation;

/** A chain split into its processing steps and the final encode. */
export interface ValidatedAudioChain {
  processing: readonly ProcessingOperation[];
  encode: EncodeOperation;
}

export class InvalidOperationChainError extends Error {
  readonly code = 'INVALID_OPERATION_CHAIN';
  constructor(message: string) {
    super(message);
    this.name = 'InvalidOperationChainError';
  }
}

type NumericRange = readonly [min: number, max: number];

const PARAM_RANGES: {
  [T in ResolvedAudioOperation['type']]: Record<string, NumericRange>;
} = {
  'trim-silence': { aggressiveness: [0, 1], minSilenceDuration: [100, 5000] },
  normalize: { targetLevel: [-70, 0] },
  compress: { ratio: [1, 20], threshold: [-60, 0], attack: [0, 100], release: [0, 1000] },
  speedup: { rate: [0.5, 5] },
  encode: { bitrate: [12, 128], channels: [1, 2] },
};

/**
 * Guards the processing core against a chain that skipped resolution or validation upstream.
 * The gateway validates user input; a failure here is a programming error, so the message
 * names the offending position instead of being user-friendly.
 */
export function validateResolvedChain(
  chain: readonly ResolvedAudioOperation[],
): ValidatedAudioChain {
  const last = chain.at(-1);
  if (last?.type !== 'encode') {
    throw new InvalidOperationChainError('the chain must end with exactly one encode operation');
  }
  chain.forEach((operation, index) => {
    if (operation.type === 'encode' && index !== chain.length - 1) {
      throw new InvalidOperationChainError(`encode at position ${index} is not the last operation`);
    }
    const ranges: Record<string, NumericRange> = PARAM_RANGES[operation.type];
    if (!ranges) {
      throw new InvalidOperationChainError(`unknown operation at position ${index}`);
    }
    const params = operation.params as unknown as Record<string, unknown>;
    if (operation.type === 'normalize' && typeof params.peakNormalize !== 'boolean') {
      throw new InvalidOperationChainError(
        `normalize.peakNormalize at position ${index} must be a boolean`,
      );
    }
    for (const [name, [min, max]] of Object.entries(ranges)) {
      const value = params[name];
      if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
        throw new InvalidOperationChainError(
          `${operation.type}.${name} at position ${index} must be a number in ${min}..${max}`,
        );
      }
    }
  });
  if (last.params.format !== 'opus' && last.params.format !== 'mp3') {
    throw new InvalidOperationChainError('encode.format must be opus or mp3');
  }
  if (!Number.isInteger(last.params.channels)) {
    throw new InvalidOperationChainError('encode.channels must be 1 or 2');
  }
  return {
    processing: chain.slice(0, -1) as ProcessingOperation[],
    encode: last,
  };
}
