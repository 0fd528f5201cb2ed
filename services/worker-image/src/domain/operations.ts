/**
 * The image pipeline's operation chain as the worker receives it: already resolved by the job
 * service (defaults filled in, presets expanded, 0..n resizes followed by exactly one encode).
 * The shape matches `ImageOperation` in `@tamp/proto`, so the shared definition can replace
 * this one without touching the worker.
 */

export const OUTPUT_FORMATS = ['webp', 'avif', 'jpeg', 'png'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export type ResizeFit = 'inside' | 'cover' | 'contain';
export type ResizePosition = 'centre' | 'attention' | 'entropy';

export interface ResizeParams {
  width?: number;
  height?: number;
  fit: ResizeFit;
  position: ResizePosition;
}

export interface EncodeParams {
  format: OutputFormat;
  /** 1–100, the API's quality scale; see encode-settings.ts for what each codec makes of it. */
  quality: number;
  /** 0–9, the API's effort scale. */
  effort: number;
}

export type ResolvedImageOperation =
  | { type: 'resize'; params: ResizeParams }
  | { type: 'encode'; params: EncodeParams };

/** File extension (without the dot) of each output format. */
export const OUTPUT_EXTENSIONS: Record<OutputFormat, string> = {
  webp: 'webp',
  avif: 'avif',
  jpeg: 'jpg',
  png: 'png',
};

export interface ImagePlan {
  resizes: ResizeParams[];
  encode: EncodeParams;
}

/**
 * Thrown when the chain breaks the resolved-chain contract. That is a bug upstream (the job
 * service resolves chains), not bad user input, so it is a plain TypeError subclass.
 */
export class InvalidOperationChainError extends TypeError {
  constructor(message: string) {
    super(`invalid image operation chain: ${message}`);
    this.name = 'InvalidOperationChainError';
  }
}

/** Splits a resolved chain into its resizes (in order) and its final encode. */
export function planOperations(operations: readonly ResolvedImageOperation[]): ImagePlan {
  const last = operations.at(-1);
  if (last?.type !== 'encode') {
    throw new InvalidOperationChainError('the last operation must be encode');
  }
  const resizes: ResizeParams[] = [];
  for (const [index, operation] of operations.slice(0, -1).entries()) {
    if (operation.type !== 'resize') {
      throw new InvalidOperationChainError(
        `operation ${index} is ${operation.type}; only the last one may be encode`,
      );
    }
    if (operation.params.width === undefined && operation.params.height === undefined) {
      throw new InvalidOperationChainError(
        `resize ${index} needs at least one of width and height`,
      );
    }
    resizes.push(operation.params);
  }
  if (!OUTPUT_FORMATS.includes(last.params.format)) {
    throw new InvalidOperationChainError(`unknown output format ${String(last.params.format)}`);
  }
  return { resizes, encode: last.params };
}
