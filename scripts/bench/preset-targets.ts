/**
 * Would the image presets give smaller files at the same measured quality with an SSIM target
 * instead of their fixed quality (issue 24; services/worker-image/README.md#presets-and-ssim-
 * targets)? On the corpus of scripts/bench/image-corpus.ts (image-corpus-set.ts), per preset:
 *
 * 1. fixed: the worker's own processImage with the preset's chain as proto defines it
 *    (proto/src/pipelines/image.ts, expanded like the job service does);
 * 2. target: the same chain with the encode given `ssim: T` (same format, quality and effort),
 *    T = the median over the corpus of what step 1 scored, rounded to 4 decimals.
 *
 * Every output is scored by ssim.js (scripts/measure/independent-ssim.ts: weber, whole image,
 * luma on white) against the resized input: the preset's resizes run by processImage itself into
 * a lossless PNG. CPU is process.cpuUsage() around processImage (libvips' threads included),
 * wall time likewise. Tamp's search scores a mosaic of tiles above 0.41 MP, so a target output
 * can land below T on the whole image; the table counts those.
 *
 *   node --import tsx scripts/bench/preset-targets.ts [--only name,name]
 *     [--presets chill,medium,aggressive,thumbnail] [--time-limit-s 1200] [--json results.json]
 *
 * Bounded: every fixed run first (all presets), then the target runs preset by preset; no new
 * run starts once --time-limit-s has passed (a preset's table then covers the images measured
 * both ways); Tamp's own 20 s search budget per target run. The corpus inputs are all below the
 * inline threshold (LIMITS.imageInlineBytes), so none is skipped for the inline presets.
 */
import { execFile as execFileCallback } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import {
  expandPreset,
  IMAGE_PRESET_NAMES,
  IMAGE_SSIM_TARGET,
  type ImageOperation,
  type ImagePresetName,
  imageOperationSchema,
  imagePipeline,
  LIMITS,
} from '@tamp/proto';
import sharp from 'sharp';
import { processImage } from '../../services/worker-image/src/adapters/sharp-pipeline';
import { MemoryBudget } from '../../services/worker-image/src/domain/memory-budget';
import { type Pixels, pixelsOnWhite, scoreEncoded } from '../measure/independent-ssim';
import { type CorpusImage, corpusImages, corpusInput, median, ownCpuMs } from './image-corpus-set';

const execFile = promisify(execFileCallback);
const MiB = 1024 * 1024;

interface Run {
  format: string;
  bytes: number;
  /** ssim.js on the whole output against the resized input. */
  ssim: number;
  cpuMs: number;
  wallMs: number;
  keptInput: boolean;
  /** Target runs: the API quality the search settled on, and its own score (tiles above 0.41 MP). */
  quality?: number | undefined;
  tampSsim?: number | undefined;
}

interface Row {
  image: string;
  kind: string;
  inputBytes: number;
  megapixelsIn: number;
  widthOut: number;
  heightOut: number;
  fixed: Run;
  target?: Run;
}

interface PresetResult {
  name: ImagePresetName;
  description: string;
  chain: ImageOperation[];
  /** T: the median of the fixed runs' ssim.js scores, rounded, within the API's range. */
  target?: number;
  rows: Row[];
}

/** The chain with its encode changed by `change` (validated as the gateway would). */
function withEncode(
  chain: readonly ImageOperation[],
  change: (params: Record<string, unknown>) => Record<string, unknown>,
): ImageOperation[] {
  return chain.map((operation) =>
    operation.type === 'encode'
      ? imageOperationSchema.parse({ type: 'encode', params: change({ ...operation.params }) })
      : operation,
  );
}

async function measure(
  input: string,
  outputPath: string,
  operations: ImageOperation[],
  reference: Pixels,
  memory: MemoryBudget,
): Promise<{ run: Run; megapixelsIn: number; widthOut: number; heightOut: number }> {
  const cpuBefore = ownCpuMs();
  const startedAt = performance.now();
  const result = await processImage({
    inputPath: input,
    outputPath,
    operations,
    limitInputPixels: 100_000_000,
    memory,
  });
  const wallMs = performance.now() - startedAt;
  const cpuMs = ownCpuMs() - cpuBefore;
  const ssim = await scoreEncoded(reference, await readFile(outputPath));
  await rm(outputPath, { force: true });
  const settled = result.candidates?.find((candidate) => candidate.format === result.format);
  return {
    run: {
      format: result.format,
      bytes: result.outputSize,
      ssim,
      cpuMs,
      wallMs,
      keptInput: result.keptInput === true,
      ...(result.ssimTarget !== undefined && { quality: settled?.quality, tampSsim: result.ssim }),
    },
    megapixelsIn: result.megapixelsIn,
    widthOut: result.widthOut,
    heightOut: result.heightOut,
  };
}

/** The preset's resizes, run by processImage into a lossless PNG: what outputs are scored against. */
async function resizedInput(
  input: string,
  path: string,
  chain: readonly ImageOperation[],
  memory: MemoryBudget,
): Promise<Pixels> {
  await processImage({
    inputPath: input,
    outputPath: path,
    operations: withEncode(chain, () => ({ format: 'png', quality: 100, effort: 0 })),
    limitInputPixels: 100_000_000,
    memory,
  });
  return pixelsOnWhite(sharp(path));
}

const kb = (bytes: number) => (bytes / 1000).toFixed(1);
const fixed = (value: number | undefined, digits: number) =>
  value === undefined ? '–' : value.toFixed(digits);

function summarise(runs: Run[], megapixels: number) {
  const scores = runs.map((r) => r.ssim);
  const cpuMs = runs.reduce((sum, r) => sum + r.cpuMs, 0);
  return {
    bytes: runs.reduce((sum, r) => sum + r.bytes, 0),
    ssim: { min: Math.min(...scores), median: median(scores)!, max: Math.max(...scores) },
    cpuMsPerImage: cpuMs / runs.length,
    cpuMsMedian: median(runs.map((r) => r.cpuMs))!,
    cpuMsPerMp: cpuMs / megapixels,
    wallMsMax: Math.max(...runs.map((r) => r.wallMs)),
  };
}

function printPreset(preset: PresetResult): void {
  const rows = preset.rows.filter((row) => row.target !== undefined);
  const encode = preset.chain.at(-1)!.params as Record<string, unknown>;
  console.log(`\n${preset.name}: ${preset.description}; target ssim ${fixed(preset.target, 4)}`);
  if (rows.length === 0) {
    console.log('  no image measured both ways');
    return;
  }
  const megapixels = rows.reduce((sum, row) => sum + row.megapixelsIn, 0);
  const fixedRuns = summarise(
    rows.map((row) => row.fixed),
    megapixels,
  );
  const targetRuns = summarise(
    rows.map((row) => row.target!),
    megapixels,
  );
  const qualities = rows.flatMap((row) =>
    row.target!.quality === undefined ? [] : [row.target!.quality],
  );
  console.log(
    `${rows.length} images, ${megapixels.toFixed(1)} MP in; ssim.js on the whole output; CPU per input MP`,
  );
  console.log(
    '| Run | Total kB | × fixed | SSIM min | SSIM median | SSIM max | CPU ms/image (mean, median) | CPU ms/MP | Max wall ms |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const [label, summary] of [
    [`fixed q${encode.quality}`, fixedRuns],
    [`ssim ${fixed(preset.target, 4)}`, targetRuns],
  ] as const) {
    console.log(
      `| ${label} | ${kb(summary.bytes)} | ${(summary.bytes / fixedRuns.bytes).toFixed(3)} | ${summary.ssim.min.toFixed(4)} | ${summary.ssim.median.toFixed(4)} | ${summary.ssim.max.toFixed(4)} | ${Math.round(summary.cpuMsPerImage)}, ${Math.round(summary.cpuMsMedian)} | ${Math.round(summary.cpuMsPerMp)} | ${Math.round(summary.wallMsMax)} |`,
    );
  }
  const smaller = rows.filter((row) => row.target!.bytes < row.fixed.bytes).length;
  const below = rows.filter((row) => row.target!.ssim < preset.target! - 0.0005).length;
  const overInline = rows.filter((row) => row.target!.wallMs > LIMITS.inlineReplyTimeoutMs).length;
  console.log(
    `target smaller on ${smaller}/${rows.length} images; below the target by ssim.js (more than 0.0005) on ${below}; settled qualities ${qualities.length > 0 ? `${Math.min(...qualities)}–${Math.max(...qualities)}, median ${median(qualities)}` : '–'}; target runs over the inline reply timeout (${LIMITS.inlineReplyTimeoutMs / 1000} s wall): ${overInline}; kept the input: fixed ${rows.filter((row) => row.fixed.keptInput).length}, target ${rows.filter((row) => row.target!.keptInput).length}`,
  );
  console.log(
    '  image             MP in   fixed kB  ssim     target kB  ssim    q   × fixed  CPU ms fixed, target',
  );
  for (const row of rows) {
    const target = row.target!;
    console.log(
      `  ${row.image.padEnd(16)} ${row.megapixelsIn.toFixed(2).padStart(6)} ${kb(row.fixed.bytes).padStart(10)} ${row.fixed.ssim.toFixed(4)} ${kb(target.bytes).padStart(10)} ${target.ssim.toFixed(4)} ${String(target.quality ?? '–').padStart(3)} ${(target.bytes / row.fixed.bytes).toFixed(2).padStart(8)}  ${Math.round(row.fixed.cpuMs)}, ${Math.round(target.cpuMs)}`,
    );
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      only: { type: 'string' },
      presets: { type: 'string', default: IMAGE_PRESET_NAMES.join(',') },
      'time-limit-s': { type: 'string', default: '1200' },
      json: { type: 'string' },
      /** Where the corpus packages' files are (their paths under it): / once provisioned. */
      root: { type: 'string', default: '/' },
      'no-provision': { type: 'boolean', default: false },
    },
  });
  const timeLimitMs = Number(values['time-limit-s']) * 1000;
  const images = await corpusImages({
    only: values.only?.split(','),
    root: values.root,
    provision: !values['no-provision'],
  });
  const presetNames = values.presets.split(',') as ImagePresetName[];
  const { stdout: commit } = await execFile('git', ['rev-parse', '--short', 'HEAD']);
  const date = new Date().toISOString();
  console.log(`preset-targets at ${commit.trim()}, ${date}`);
  sharp.cache(false);
  const memory = new MemoryBudget(320 * MiB);
  const startedAt = performance.now();
  const timeLeft = (what: string) => {
    if (performance.now() - startedAt <= timeLimitMs) return true;
    console.error(`time limit reached: ${what} not measured`);
    return false;
  };

  const presets: PresetResult[] = presetNames.map((name) => ({
    name,
    description: imagePipeline.presets.find((preset) => preset.name === name)!.description,
    chain: expandPreset(imagePipeline, name),
    rows: [],
  }));
  const scratch = await mkdtemp(join(tmpdir(), 'tamp-preset-targets-'));
  try {
    const inputs = new Map<string, string>();
    const referencePath = (image: CorpusImage, preset: PresetResult) =>
      join(scratch, `${image.name}-${preset.name}.png`);
    const output = join(scratch, 'output');

    fixedRuns: for (const image of images) {
      const imageScratch = join(scratch, image.name);
      await mkdir(imageScratch);
      const input = await corpusInput(image, values.root, imageScratch);
      inputs.set(image.name, input);
      for (const preset of presets) {
        if (!timeLeft(`fixed ${preset.name} of ${image.name} and after`)) break fixedRuns;
        const reference = await resizedInput(
          input,
          referencePath(image, preset),
          preset.chain,
          memory,
        );
        const measured = await measure(input, output, preset.chain, reference, memory);
        preset.rows.push({
          image: image.name,
          kind: image.kind,
          inputBytes: (await stat(input)).size,
          megapixelsIn: measured.megapixelsIn,
          widthOut: measured.widthOut,
          heightOut: measured.heightOut,
          fixed: measured.run,
        });
        console.error(
          `${preset.name} ${image.name}: fixed ${kb(measured.run.bytes)} kB, ssim ${measured.run.ssim.toFixed(4)}, ${Math.round(measured.run.cpuMs)} ms CPU`,
        );
      }
    }

    targetRuns: for (const preset of presets) {
      const scores = preset.rows.map((row) => row.fixed.ssim);
      if (scores.length === 0) continue;
      preset.target = Math.min(
        IMAGE_SSIM_TARGET.max,
        Math.max(IMAGE_SSIM_TARGET.min, Math.round(median(scores)! * 10_000) / 10_000),
      );
      const ssim = preset.target;
      const chain = withEncode(preset.chain, (params) => ({ ...params, ssim }));
      for (const row of preset.rows) {
        if (!timeLeft(`target ${preset.name} of ${row.image} and after`)) break targetRuns;
        const image = images.find((candidate) => candidate.name === row.image)!;
        const reference = await pixelsOnWhite(sharp(referencePath(image, preset)));
        const measured = await measure(inputs.get(row.image)!, output, chain, reference, memory);
        row.target = measured.run;
        console.error(
          `${preset.name} ${row.image}: ssim ${ssim} → q${measured.run.quality} ${kb(measured.run.bytes)} kB (fixed ${kb(row.fixed.bytes)}), ssim ${measured.run.ssim.toFixed(4)}, ${Math.round(measured.run.cpuMs)} ms CPU`,
        );
      }
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }

  const wallS = (performance.now() - startedAt) / 1000;
  for (const preset of presets) printPreset(preset);
  console.log(`\n${Math.round(wallS)} s wall for the runs`);
  if (values.json) {
    await writeFile(
      values.json,
      `${JSON.stringify({ commit: commit.trim(), date, wallS, presets }, null, 2)}\n`,
    );
  }
}

await main();
