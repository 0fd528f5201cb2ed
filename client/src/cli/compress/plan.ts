import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, extname, isAbsolute, join, relative, resolve } from 'node:path';
import {
  EXTENSIONS_BY_PIPELINE,
  expandPreset,
  extensionOf,
  JOB_BODIES,
  PIPELINE_DEFINITIONS,
  PIPELINES,
  type Pipeline,
  UPLOAD_FIELD_BY_PIPELINE,
} from '@tamp/proto';
import { glob, isDynamicPattern } from 'tinyglobby';
import { pipelineFor } from '../../client';
import { validated } from '../../validation';
import { UsageError } from '../failures';

/** What a job body says about processing: a preset or a chain of operations. */
export interface Choice {
  preset?: string;
  operations?: unknown[];
}

export interface ResolvedChoice {
  /** Sent in the job body as is. */
  body: Choice;
  /** The resolved chain (preset expanded, encode last): part of a file's resume key. */
  chain: unknown[];
  /**
   * Extension of the output the chain produces (`webp`, `ogg`, `txt`…), or UNRESOLVED_EXTENSION
   * when the job chooses the format (`format: "auto"`) and only its result tells.
   */
  extension: string;
}

/** The planned output's extension while the format is the job's to choose (see withOutputOf). */
export const UNRESOLVED_EXTENSION = 'auto';

/**
 * The file with its output named after `result` (a URL or path whose extension is the format
 * the job chose) when the plan could not know it; the file as is otherwise.
 */
export function withOutputOf(file: PlannedFile, result: string): PlannedFile {
  const suffix = `.${UNRESOLVED_EXTENSION}`;
  if (file.choice.extension !== UNRESOLVED_EXTENSION || !file.output.endsWith(suffix)) return file;
  const extension = extensionOf(basename(URL.canParse(result) ? new URL(result).pathname : result));
  if (extension === undefined) return file;
  return { ...file, output: `${file.output.slice(0, -suffix.length)}${extension}` };
}

export interface PlannedFile {
  path: string;
  /** How the file is named in output: relative to the working directory when inside it. */
  display: string;
  pipeline: Pipeline;
  /** Absolute path of the result. */
  output: string;
  choice: ResolvedChoice;
}

export interface Plan {
  files: PlannedFile[];
  /** Files found in folders that no pipeline takes (shown as a note). */
  ignored: string[];
}

const DEFAULT_PRESET = 'medium';

/**
 * `--preset NAME` for every pipeline or `--preset PIPELINE=NAME` for one, and `--ops JSON`
 * (an array for every pipeline it is valid for, or `{ "<pipeline>": [...] }`; `@file.json`
 * reads a file). Pipelines named nowhere use the `medium` preset, which all three have.
 */
export function parseChoices(
  presets: readonly string[],
  ops: string | undefined,
): { all?: Choice; byPipeline: Partial<Record<Pipeline, Choice>> } {
  const byPipeline: Partial<Record<Pipeline, Choice>> = {};
  let all: Choice | undefined;
  for (const value of presets) {
    const [left, right] = value.includes('=') ? value.split('=', 2) : [undefined, value];
    if (left === undefined) {
      if (all !== undefined) throw new UsageError('--preset NAME can be given once');
      all = { preset: right };
    } else {
      const pipeline = pipelineNamed(left);
      if (byPipeline[pipeline] !== undefined) {
        throw new UsageError(`two choices for ${pipeline}: give one --preset ${pipeline}=NAME`);
      }
      byPipeline[pipeline] = { preset: right };
    }
  }
  if (ops !== undefined) {
    const parsed = parseJson(ops.startsWith('@') ? readFileSync(ops.slice(1), 'utf8') : ops);
    if (Array.isArray(parsed)) {
      if (all !== undefined) throw new UsageError('give either --preset NAME or --ops, not both');
      all = { operations: parsed };
    } else if (typeof parsed === 'object' && parsed !== null) {
      for (const [name, operations] of Object.entries(parsed)) {
        const pipeline = pipelineNamed(name);
        if (byPipeline[pipeline] !== undefined) {
          throw new UsageError(`two choices for ${pipeline}: a --preset and --ops`);
        }
        if (!Array.isArray(operations)) {
          throw new UsageError(`--ops: the ${pipeline} operations must be an array`);
        }
        byPipeline[pipeline] = { operations };
      }
    } else {
      throw new UsageError(
        '--ops takes a JSON array of operations, or an object of arrays by pipeline',
      );
    }
  }
  return { ...(all !== undefined && { all }), byPipeline };
}

/** Checks a choice against proto's job body schema and resolves its chain and output type. */
export function resolveChoice(pipeline: Pipeline, choice: Choice): ResolvedChoice {
  const body = validated(
    JOB_BODIES[pipeline],
    { [UPLOAD_FIELD_BY_PIPELINE[pipeline]]: 'upl_check', ...choice },
    `--preset/--ops for ${pipeline} files`,
  ) as { preset?: string; operations?: { type: string; params: unknown }[] };
  const definition = PIPELINE_DEFINITIONS[pipeline];
  const chain =
    body.preset !== undefined
      ? expandPreset(definition, body.preset)
      : definition.finalizeChain(body.operations ?? []);
  const described = definition.describeOutput(chain).extension;
  const extension = described === undefined ? UNRESOLVED_EXTENSION : String(described);
  return { body: choice, chain, extension };
}

/**
 * Expands files, folders (recursively) and globs into the files to compress, each with its
 * pipeline, choice and output path. Folder and glob results keep their layout under `out`;
 * named files go to its top. The output folder itself is never an input.
 */
export async function planFiles(
  inputs: readonly string[],
  options: {
    out: string;
    choices: ReturnType<typeof parseChoices>;
    cwd?: string;
  },
): Promise<Plan> {
  const cwd = options.cwd ?? process.cwd();
  const out = resolve(cwd, options.out);
  const found = new Map<string, string>();
  const ignored: string[] = [];
  const accepted = new Set<string>(Object.values(EXTENSIONS_BY_PIPELINE).flat());
  const keep = (path: string, layout: string) => {
    if (isInside(path, out) || found.has(path)) return;
    if (!accepted.has(extensionOf(path) ?? '')) {
      ignored.push(path);
      return;
    }
    found.set(path, layout);
  };
  for (const input of inputs) {
    const absolute = resolve(cwd, input);
    if (existsSync(absolute) && statSync(absolute).isDirectory()) {
      const paths = await glob('**/*', { cwd: absolute, absolute: true, onlyFiles: true });
      for (const path of paths.sort()) keep(resolve(path), relative(absolute, path));
    } else if (existsSync(absolute)) {
      if (!accepted.has(extensionOf(absolute) ?? '')) {
        throw new UsageError(
          `${input}: no pipeline takes this type (accepted: ${[...accepted].join(' ')})`,
        );
      }
      keep(absolute, basename(absolute));
    } else if (isDynamicPattern(input)) {
      const base = resolve(cwd, staticBase(input));
      const paths = await glob(input, { cwd, absolute: true, onlyFiles: true });
      if (paths.length === 0) throw new UsageError(`no files match ${input}`);
      for (const path of paths.sort()) keep(resolve(path), relative(base, path));
    } else {
      throw new UsageError(`no such file or folder: ${input}`);
    }
  }
  if (found.size === 0) {
    throw new UsageError(
      `nothing to compress in ${inputs.join(' ')}` +
        (ignored.length > 0 ? ` (${ignored.length} files of other types)` : ''),
    );
  }

  const resolved = new Map<Pipeline, ResolvedChoice>();
  const choiceFor = (pipeline: Pipeline) => {
    let choice = resolved.get(pipeline);
    if (choice === undefined) {
      const { all, byPipeline } = options.choices;
      choice = resolveChoice(pipeline, byPipeline[pipeline] ?? all ?? { preset: DEFAULT_PRESET });
      resolved.set(pipeline, choice);
    }
    return choice;
  };
  const files = [...found].map(([path, layout]) => {
    const pipeline = pipelineFor(path);
    const choice = choiceFor(pipeline);
    const stem = layout.slice(0, layout.length - extname(layout).length);
    return { path, layout, pipeline, choice, output: join(out, `${stem}.${choice.extension}`) };
  });
  // photo.jpg and photo.png would both become photo.webp: such files keep their extension.
  const sharing = new Map<string, number>();
  for (const file of files) sharing.set(file.output, (sharing.get(file.output) ?? 0) + 1);
  return {
    files: files.map(({ layout, ...file }) => ({
      ...file,
      display: displayName(file.path, cwd),
      output:
        (sharing.get(file.output) ?? 0) > 1
          ? join(out, `${layout}.${file.choice.extension}`)
          : file.output,
    })),
    ignored,
  };
}

function pipelineNamed(name: string): Pipeline {
  if ((PIPELINES as readonly string[]).includes(name)) return name as Pipeline;
  throw new UsageError(`unknown pipeline ${name} (use ${PIPELINES.join(', ')})`);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UsageError(`--ops is not JSON: ${(error as Error).message}`);
  }
}

/** The folder part of a glob before its first pattern segment: `photos/**\/*.jpg` → `photos`. */
function staticBase(pattern: string): string {
  const segments = pattern.split('/');
  const fixed: string[] = [];
  for (const segment of segments.slice(0, -1)) {
    if (isDynamicPattern(segment)) break;
    fixed.push(segment);
  }
  return fixed.length === 0 ? '.' : fixed.join('/');
}

function isInside(path: string, folder: string): boolean {
  const from = relative(folder, path);
  return from === '' || (!from.startsWith('..') && !isAbsolute(from));
}

function displayName(path: string, cwd: string): string {
  return isInside(path, cwd) ? relative(cwd, path) : path;
}
