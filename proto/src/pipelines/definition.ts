import { z } from 'zod';
import type { Pipeline } from '../limits';

/**
 * A pipeline is defined once here: its operations (zod schemas whose ranges and defaults are the
 * spec's tables) and its presets. Request validation, the `/operations` and `/presets`
 * endpoints, the OpenAPI document and the workers all derive from these definitions.
 */
export interface OperationDefinition<Type extends string, Params extends z.ZodType> {
  type: Type;
  description: string;
  params: Params;
}

export interface PresetDefinition<Name extends string> {
  name: Name;
  description: string;
  /** Operations as the spec lists them; unspecified params take the operation defaults. */
  operations: ReadonlyArray<{ type: string; params?: Record<string, unknown> }>;
  /** True when the preset can never take the inline path (e.g. AVIF output). */
  alwaysQueued: boolean;
}

/** A preset as the spec's table lists it; `alwaysQueued` when it can never take the inline path. */
export function preset<Name extends string>(
  name: Name,
  description: string,
  operations: PresetDefinition<Name>['operations'],
  alwaysQueued = false,
): PresetDefinition<Name> {
  return { name, description, operations, alwaysQueued };
}

export function defineOperation<Type extends string, Params extends z.ZodType>(
  definition: OperationDefinition<Type, Params>,
): OperationDefinition<Type, Params> {
  return definition;
}

/** The encode that ends every audio or image chain, as its pipeline declares it. */
export interface EncodeDeclaration<
  Extensions extends Record<string, string>,
  Shape,
  Chosen extends string = never,
> {
  description: string;
  /** Each output format and the file extension its result is stored under. */
  extensions: Extensions;
  defaultFormat: NoInfer<keyof Extensions & string>;
  /**
   * A `format` value that names no format but lets the worker choose one per input (image
   * `auto`): it has no extension of its own, the result's is that of the format chosen.
   */
  chosenFormat?: { name: Chosen; description: string };
  /** The codec's own parameters, after `format`. */
  params: Shape;
  /** Rules across the params (e.g. a param valid with one format only); issues name the param. */
  check?: (params: Record<string, unknown>) => readonly { path: string; message: string }[];
}

/**
 * The encode operation: its `format` is one of the keys of the extension table, so no output
 * format exists without the file extension its result is stored under.
 */
function encodeOperation<
  const Extensions extends Record<string, string>,
  Shape extends z.ZodRawShape,
  const Chosen extends string = never,
>(definition: EncodeDeclaration<Extensions, Shape, Chosen>) {
  type Format = (keyof Extensions & string) | Chosen;
  const fixed = Object.keys(definition.extensions) as [Format, ...Format[]];
  const chosen = definition.chosenFormat;
  const formats = chosen === undefined ? fixed : ([...fixed, chosen.name] as typeof fixed);
  const format = z
    .enum(formats)
    .default(definition.defaultFormat as never)
    .describe(
      [
        ...fixed.map((name) => `${name} (.${definition.extensions[name as keyof Extensions]})`),
        ...(chosen === undefined ? [] : [`${chosen.name} (${chosen.description})`]),
      ].join(', '),
    );
  const check = definition.check;
  const params = z.strictObject({ format, ...definition.params });
  return defineOperation({
    type: 'encode',
    description: definition.description,
    params:
      check === undefined
        ? params
        : params.superRefine((value, context) => {
            for (const issue of check(value as Record<string, unknown>)) {
              context.addIssue({ code: 'custom', path: [issue.path], message: issue.message });
            }
          }),
  });
}

/** `{ type, params? }` where omitted params take their defaults. */
export function operationSchema<Type extends string, Params extends z.ZodType>(
  definition: OperationDefinition<Type, Params>,
) {
  return z.strictObject({
    type: z.literal(definition.type),
    // prefault parses the empty object, so per-field defaults apply when params is omitted.
    params: definition.params.prefault({} as z.input<Params>),
  });
}

type AnyOperationDefinition = OperationDefinition<string, z.ZodType>;
type OperationSchemaOf<Definition> =
  Definition extends OperationDefinition<infer Type, infer Params>
    ? ReturnType<typeof operationSchema<Type, Params>>
    : never;

/**
 * A pipeline's operations, each listed once: the definitions (for `/operations`) and the
 * `{ type, params? }` union that validates them.
 */
export function pipelineOperations<
  const Definitions extends readonly [AnyOperationDefinition, ...AnyOperationDefinition[]],
>(...definitions: Definitions) {
  const options = definitions.map((definition) => operationSchema(definition)) as unknown as {
    -readonly [Index in keyof Definitions]: OperationSchemaOf<Definitions[Index]>;
  };
  return { operations: definitions, operationSchema: z.discriminatedUnion('type', options) };
}

type OperationOf<
  Definitions extends readonly [AnyOperationDefinition, ...AnyOperationDefinition[]],
> = z.output<ReturnType<typeof pipelineOperations<Definitions>>['operationSchema']>;

/**
 * The spec's encode rule for audio and image: one encode always runs last; when the chain has
 * none the defaults are appended, when it has several the last one wins.
 */
export function placeEncodeLast<Operation extends { type: string }>(
  operations: readonly Operation[],
  defaultEncode: Operation,
): Operation[] {
  const processing = operations.filter((operation) => operation.type !== 'encode');
  const encode = operations.findLast((operation) => operation.type === 'encode') ?? defaultEncode;
  return [...processing, encode];
}

export interface ParameterDescription {
  type: string;
  description?: string;
  min?: number;
  max?: number;
  default?: unknown;
  enum?: readonly unknown[];
}

interface JsonSchemaProperty {
  type?: string;
  description?: string;
  minimum?: number;
  maximum?: number;
  default?: unknown;
  enum?: unknown[];
}

/** The `/operations` shape (docs/decisions.md#jobs), read off the zod schema so it cannot drift. */
export function describeOperation(definition: OperationDefinition<string, z.ZodType>): {
  type: string;
  description: string;
  params: Record<string, ParameterDescription>;
} {
  const schema = z.toJSONSchema(definition.params, { io: 'input', unrepresentable: 'any' }) as {
    properties?: Record<string, JsonSchemaProperty>;
  };
  const params: Record<string, ParameterDescription> = {};
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    params[name] = {
      type: property.type ?? 'string',
      ...(property.description !== undefined && { description: property.description }),
      ...(property.minimum !== undefined && { min: property.minimum }),
      ...(property.maximum !== undefined && { max: property.maximum }),
      ...(property.default !== undefined && { default: property.default }),
      ...(property.enum !== undefined && { enum: property.enum }),
    };
  }
  return { type: definition.type, description: definition.description, params };
}

export interface PipelineDefinition<
  Operation extends { type: string; params: unknown },
  PresetName extends string,
> {
  pipeline: Pipeline;
  operations: ReadonlyArray<OperationDefinition<string, z.ZodType>>;
  /** Validates one `{ type, params? }` and fills defaults. */
  operationSchema: z.ZodType<Operation, unknown>;
  presets: ReadonlyArray<PresetDefinition<PresetName>>;
  presetNames: readonly [PresetName, ...PresetName[]];
  /** Applies the pipeline's chain rules (e.g. encode last) to validated operations. */
  finalizeChain(operations: readonly Operation[]): Operation[];
  /** Output description of a resolved chain, for `/presets` and for result naming. */
  describeOutput(chain: readonly Operation[]): Record<string, unknown>;
}

/** Expands a preset into its validated, finalized chain. */
export function expandPreset<Operation extends { type: string; params: unknown }>(
  definition: PipelineDefinition<Operation, string>,
  presetName: string,
): Operation[] {
  const preset = definition.presets.find((candidate) => candidate.name === presetName);
  if (preset === undefined) throw new Error(`unknown ${definition.pipeline} preset ${presetName}`);
  const operations = preset.operations.map((operation) =>
    definition.operationSchema.parse(operation),
  );
  return definition.finalizeChain(operations);
}

/** The `/presets` shape (docs/decisions.md#jobs). */
export function describePresets<Operation extends { type: string; params: unknown }>(
  definition: PipelineDefinition<Operation, string>,
) {
  return {
    presets: definition.presets.map((preset) => {
      const chain = expandPreset(definition, preset.name);
      return {
        name: preset.name,
        description: preset.description,
        operations: chain,
        output: definition.describeOutput(chain),
        queued: preset.alwaysQueued,
      };
    }),
  };
}

export function describeOperations(
  definition: PipelineDefinition<{ type: string; params: unknown }, string>,
) {
  return { operations: definition.operations.map(describeOperation) };
}

type EncodeOf<Operation> = Extract<Operation, { type: 'encode' }>;

/** A resolved chain of an encoding pipeline, split: the processing operations, then its encode. */
export interface SplitChain<Operation extends { type: string }> {
  processing: Exclude<Operation, { type: 'encode' }>[];
  encode: EncodeOf<Operation>;
}

/**
 * A chain that breaks the resolved-chain contract (exactly one encode, last) reached code that
 * relies on it: a bug upstream, since every boundary validates chains with the pipeline's
 * `chainSchema`, never bad user input.
 */
export class InvalidChainError extends TypeError {
  override readonly name = 'InvalidChainError';
}

/** The resolved-chain rule of audio and image: exactly one encode, and it is last. */
function endsWithTheOnlyEncode(chain: readonly { type: string }[]): boolean {
  return (
    chain.at(-1)?.type === 'encode' &&
    chain.filter((operation) => operation.type === 'encode').length === 1
  );
}

/** A pipeline whose chain always ends with one encode (audio, image), and that encode's rules. */
export interface EncodedPipelineDefinition<
  Operation extends { type: string; params: unknown },
  PresetName extends string,
> extends PipelineDefinition<Operation, PresetName> {
  /** The encode appended to a chain that has none: the encode operation's defaults. */
  defaultEncode: EncodeOf<Operation>;
  /** The encode that ends a resolved chain. */
  encodeOf(chain: readonly Operation[]): EncodeOf<Operation>;
  /** A resolved chain's processing operations and its encode (InvalidChainError otherwise). */
  splitChain(chain: readonly Operation[]): SplitChain<Operation>;
}

/**
 * An audio or image pipeline, defined once: its processing operations and the encode that ends
 * every chain (the validating union is derived from them), its presets, and the spec's encode
 * rule (placeEncodeLast, with the encode's defaults when a chain has none). A chain's output is
 * described by its encode: the encode's params and the file extension of its format.
 */
export function encodedPipeline<
  const Definitions extends readonly [AnyOperationDefinition, ...AnyOperationDefinition[]],
  const Extensions extends Record<string, string>,
  Shape extends z.ZodRawShape,
  PresetName extends string,
  const Chosen extends string = never,
>(definition: {
  pipeline: Pipeline;
  /** The operations before the encode, in the order `/operations` lists them. */
  operations: Definitions;
  encode: EncodeDeclaration<Extensions, Shape, Chosen>;
  presets: ReadonlyArray<PresetDefinition<PresetName>>;
  presetNames: readonly [PresetName, ...PresetName[]];
}) {
  type Operation = OperationOf<
    readonly [...Definitions, ReturnType<typeof encodeOperation<Extensions, Shape, Chosen>>]
  >;
  const { encode: declaration, ...rest } = definition;
  const operations = [...definition.operations, encodeOperation(declaration)] as const;
  const { operationSchema } = pipelineOperations(...operations);
  const defaultEncode = operationSchema.parse({ type: 'encode' }) as EncodeOf<Operation>;
  const splitChain = (chain: readonly Operation[]): SplitChain<Operation> => {
    if (!endsWithTheOnlyEncode(chain)) {
      throw new InvalidChainError(`an ${definition.pipeline} chain ends with exactly one encode`);
    }
    return {
      processing: chain.slice(0, -1) as Exclude<Operation, { type: 'encode' }>[],
      encode: chain.at(-1) as EncodeOf<Operation>,
    };
  };
  const encodeOf = (chain: readonly Operation[]): EncodeOf<Operation> => splitChain(chain).encode;
  const pipeline: EncodedPipelineDefinition<Operation, PresetName> = {
    ...rest,
    operations,
    operationSchema: operationSchema as unknown as z.ZodType<Operation, unknown>,
    defaultEncode,
    encodeOf,
    splitChain,
    finalizeChain: (chain) => placeEncodeLast(chain, defaultEncode as Operation),
    describeOutput: (chain) => {
      const { params } = encodeOf(chain) as { params: { format: string } };
      // A chosen format (image auto) has no extension until the worker has chosen.
      const extension: string | undefined = declaration.extensions[params.format];
      return extension === undefined ? { ...params } : { ...params, extension };
    },
  };
  /** A resolved chain as it travels between services: validated once, where it arrives. */
  const chainSchema = z
    .array(operationSchema)
    .refine(endsWithTheOnlyEncode, { message: 'a resolved chain ends with exactly one encode' });
  return { ...pipeline, operationSchema, chainSchema };
}
