/**
 * Tamp's image output against the reference encoders on a corpus of real photographs, renders
 * and graphics from Debian packages (issue 24; services/worker-image/README.md#against-the-
 * reference-encoders), at equal measured quality.
 *
 * For each image, and one SSIM target:
 * - Tamp: the worker's own processImage with `format: "auto"` and with each fixed format
 *   (webp, avif, jpeg) at that `ssim` target, effort 4, plus a fixed WebP at quality 80 (no
 *   search) as the cost of one plain encode;
 * - the reference encoders, each bisected over its own quality setting for the smallest output
 *   that meets the target: `cwebp` (Debian's webp, method 4 like Tamp's effort 4; lossless
 *   too, kept when smaller), `avifenc` (Debian's libavif-bin with libaom, speed 5 = sharp's
 *   effort 4, 4:2:0, constant-quality mode) and mozjpeg (3.3.1 compiled to WebAssembly, from
 *   the npm package @jsquash/jpeg: Debian ships no mozjpeg, its cjpeg is libjpeg-turbo's);
 * - every output scored by ssim.js (weber, no downsampling: the definition Tamp's own
 *   domain/ssim.ts follows, computed by an independent implementation) on the luma of the
 *   whole image put on white, against the decoded input.
 *
 * "Equal measured quality": a reference is held to what the Tamp output it is compared with
 * scores, capped at the target: a Tamp output that overshoots the target is charged for it, one
 * that falls short (its search scores a mosaic of tiles on images over 0.41 MP) is compared
 * with references at its own lower score, and the table says so.
 *
 * The corpus is provisioned by the project (`npm run tools -- image-corpus`, done here too):
 * photographs from mate-backgrounds, renders from gnome-backgrounds (WebP), graphics with
 * transparency or flat colours from desktop-base and adwaita-icon-theme. Some are downscaled
 * first, written as a real upload would be (JPEG q92, lossless WebP), to cover several sizes.
 *
 *   node --import tsx scripts/bench/image-corpus.ts [--ssim 0.98] [--only name,name]
 *     [--time-limit-s 1800] [--json results.json]
 *
 * Bounded: per reference encoder and image at most 3 bisections (the target, auto's score, the
 * same format's score) of at most 11 encodes each, most of them shared; 120 s per reference
 * encode; Tamp's own 20 s search budget; no new image is started once --time-limit-s has passed.
 */
import { execFile as execFileCallback } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import encodeMozjpeg, { init as initMozjpegModule } from '@jsquash/jpeg/encode.js';
import type { ImageCandidate, ImageOperation } from '@tamp/proto';
import sharp from 'sharp';
import { processImage } from '../../services/worker-image/src/adapters/sharp-pipeline';
import { MemoryBudget } from '../../services/worker-image/src/domain/memory-budget';
import { TOOLS_BIN } from '../infra/provision';
import { type Pixels, pixelsOnWhite, scoreEncoded } from '../measure/independent-ssim';
import {
  type CorpusImage,
  corpusImages,
  corpusInput,
  type Kind,
  median,
  ownCpuMs,
} from './image-corpus-set';

const execFile = promisify(execFileCallback);
const MiB = 1024 * 1024;

/** What the references' bisections may spend per image and per encode. */
const MAX_PROBES_PER_SEARCH = 10;
const REFERENCE_ENCODE_TIMEOUT_MS = 120_000;

/**
 * CPU time of this process's waited-for children (user + system, /proc/self/stat's cutime and
 * cstime): process.cpuUsage() counts this process only, and the reference encoders run as
 * children. Linux ticks are 10 ms.
 */
function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

interface Probe {
  /** The encoder's own setting (cwebp -q, avifenc cq-level, mozjpeg quality), or "lossless". */
  setting: string;
  bytes: number;
  ssim: number;
  cpuMs: number;
}

interface ReferenceEncoder {
  name: 'cwebp' | 'avifenc' | 'mozjpeg';
  /** Levels from worst to best quality; the encoder's own setting for each. */
  levels: number;
  settingAt(level: number): string;
  encode(level: number): Promise<Buffer>;
  /** A lossless encode the search also weighs (cwebp -lossless). */
  lossless?: () => Promise<Buffer>;
}

interface ImageFiles {
  /** What Tamp gets, as a real upload. */
  input: string;
  /** The same pixels, oriented, lossless: what the command-line encoders read. */
  sourcePng: string;
  /** RGBA on white: what mozjpeg encodes (JPEG has no alpha; Tamp puts it on white too). */
  sourceOnWhite: Pixels;
  scratch: string;
}

function referenceEncoders(files: ImageFiles, toolsDir: string): ReferenceEncoder[] {
  const run = async (tool: string, args: string[], output: string): Promise<Buffer> => {
    await execFile(join(toolsDir, tool), args, { timeout: REFERENCE_ENCODE_TIMEOUT_MS });
    const bytes = await readFile(output);
    await rm(output, { force: true });
    return bytes;
  };
  const webpOut = join(files.scratch, 'reference.webp');
  const avifOut = join(files.scratch, 'reference.avif');
  return [
    {
      name: 'cwebp',
      levels: 101,
      settingAt: (level) => `q${level}`,
      encode: (level) =>
        run(
          'cwebp',
          ['-quiet', '-q', `${level}`, '-m', '4', files.sourcePng, '-o', webpOut],
          webpOut,
        ),
      lossless: () =>
        run('cwebp', ['-quiet', '-lossless', '-m', '4', files.sourcePng, '-o', webpOut], webpOut),
    },
    {
      // cq-level 63 (worst) … 0 (lossless colour); libavif 1.x's -q maps onto exactly this mode.
      name: 'avifenc',
      levels: 64,
      settingAt: (level) => `cq${63 - level}`,
      encode: (level) =>
        run(
          'avifenc',
          [
            '--speed',
            '5',
            '--yuv',
            '420',
            '--depth',
            '8',
            '--min',
            '0',
            '--max',
            '63',
            '-a',
            'end-usage=q',
            '-a',
            `cq-level=${63 - level}`,
            files.sourcePng,
            avifOut,
          ],
          avifOut,
        ),
    },
    {
      name: 'mozjpeg',
      levels: 100,
      settingAt: (level) => `q${level + 1}`,
      encode: async (level) =>
        Buffer.from(await encodeMozjpeg(files.sourceOnWhite, { quality: level + 1 })),
    },
  ];
}

/**
 * One reference encoder on one image: every encode it made, kept so that a second target (a
 * Tamp output that scored below the first) bisects mostly over settings already measured.
 */
class ReferenceSearch {
  readonly probes = new Map<number, Probe>();
  private losslessProbe: Probe | undefined;

  constructor(
    readonly encoder: ReferenceEncoder,
    private readonly reference: Pixels,
  ) {}

  get cpuMs(): number {
    let total = this.losslessProbe?.cpuMs ?? 0;
    for (const probe of this.probes.values()) total += probe.cpuMs;
    return total;
  }

  private async measure(encode: () => Promise<Buffer>, setting: string): Promise<Probe> {
    const own = ownCpuMs();
    const children = childrenCpuMs();
    const bytes = await encode();
    const cpuMs = ownCpuMs() - own + (childrenCpuMs() - children);
    return { setting, bytes: bytes.length, ssim: await scoreEncoded(this.reference, bytes), cpuMs };
  }

  private async probe(level: number): Promise<Probe> {
    const known = this.probes.get(level);
    if (known) return known;
    const probe = await this.measure(
      () => this.encoder.encode(level),
      this.encoder.settingAt(level),
    );
    this.probes.set(level, probe);
    return probe;
  }

  /**
   * The smallest output measured to meet the target: bisection for the lowest level that meets
   * it (quality is nearly monotonic in the level), then the smallest of everything measured that
   * meets it. Undefined when even the best level falls short.
   */
  async smallestMeeting(target: number): Promise<Probe | undefined> {
    if (this.encoder.lossless && !this.losslessProbe) {
      this.losslessProbe = await this.measure(this.encoder.lossless, 'lossless');
    }
    let low = 0;
    let high = this.encoder.levels - 1;
    let probes = 0;
    if ((await this.probe(high)).ssim >= target) {
      while (low < high && probes++ < MAX_PROBES_PER_SEARCH) {
        const middle = Math.floor((low + high) / 2);
        if ((await this.probe(middle)).ssim >= target) high = middle;
        else low = middle + 1;
      }
    }
    const meeting = [...this.probes.values(), ...(this.losslessProbe ? [this.losslessProbe] : [])]
      .filter((probe) => probe.ssim >= target)
      .sort((a, b) => a.bytes - b.bytes);
    return meeting[0];
  }
}

interface TampOutput {
  mode: string;
  format: string;
  bytes: number;
  keptInput: boolean;
  /** Tamp's own score (on the sample's tiles when the image is over 0.41 MP). */
  tampSsim: number | undefined;
  /** ssim.js on the whole output. */
  ssim: number;
  cpuMs: number;
  wallMs: number;
  candidates: ImageCandidate[];
}

const TAMP_MODES: { mode: string; params: (target: number) => Record<string, unknown> }[] = [
  { mode: 'auto', params: (ssim) => ({ format: 'auto', ssim, quality: 80, effort: 4 }) },
  { mode: 'webp', params: (ssim) => ({ format: 'webp', ssim, quality: 80, effort: 4 }) },
  { mode: 'avif', params: (ssim) => ({ format: 'avif', ssim, quality: 80, effort: 4 }) },
  { mode: 'jpeg', params: (ssim) => ({ format: 'jpeg', ssim, quality: 80, effort: 4 }) },
  // One plain encode, no search: what the search's extra CPU is counted from.
  { mode: 'webp q80', params: () => ({ format: 'webp', quality: 80, effort: 4 }) },
];

async function runTamp(
  files: ImageFiles,
  reference: Pixels,
  target: number,
  memory: MemoryBudget,
): Promise<Map<string, TampOutput>> {
  const outputs = new Map<string, TampOutput>();
  for (const { mode, params } of TAMP_MODES) {
    const outputPath = join(files.scratch, `tamp-${mode.replace(' ', '-')}`);
    const cpuBefore = ownCpuMs();
    const startedAt = performance.now();
    const result = await processImage({
      inputPath: files.input,
      outputPath,
      operations: [{ type: 'encode', params: params(target) }] as ImageOperation[],
      limitInputPixels: 100_000_000,
      memory,
    });
    const wallMs = performance.now() - startedAt;
    const cpuMs = ownCpuMs() - cpuBefore;
    const bytes = await readFile(outputPath);
    outputs.set(mode, {
      mode,
      format: result.format,
      bytes: result.outputSize,
      keptInput: result.keptInput === true,
      tampSsim: result.ssim,
      ssim: await scoreEncoded(reference, bytes),
      cpuMs,
      wallMs,
      candidates: result.candidates ?? [],
    });
    await rm(outputPath, { force: true });
  }
  return outputs;
}

/** The input as Tamp gets it, and the same pixels for the command-line encoders and the scores. */
async function prepare(image: CorpusImage, root: string, scratch: string): Promise<ImageFiles> {
  const input = await corpusInput(image, root, scratch);
  const sourcePng = join(scratch, 'source.png');
  await sharp(input).rotate().png({ compressionLevel: 1 }).toFile(sourcePng);
  return { input, sourcePng, sourceOnWhite: await pixelsOnWhite(sharp(sourcePng)), scratch };
}

interface ImageRow {
  name: string;
  kind: Kind;
  debianPackage: string;
  path: string;
  width: number;
  height: number;
  megapixels: number;
  transparent: boolean;
  inputBytes: number;
  target: number;
  tamp: Record<string, TampOutput>;
  /** Per reference encoder: its smallest output at the target, and at what auto scored. */
  references: Record<
    string,
    { atTarget?: Probe; atAuto?: Probe; atOwnFormat?: Probe; cpuMs: number; probes: number }
  >;
  bestReference: { name: string; bytes: number; ssimHeld: number } | undefined;
  /** Tamp auto's bytes / the best reference's at auto's score (capped at the target). */
  ratio: number | undefined;
  /** Tamp's fixed format / the same format's reference encoder, each at that output's score. */
  formatRatios: Record<string, number | undefined>;
}

const TAMP_FORMAT_OF: Record<string, 'webp' | 'avif' | 'jpeg'> = {
  cwebp: 'webp',
  avifenc: 'avif',
  mozjpeg: 'jpeg',
};

async function measureImage(
  image: CorpusImage,
  options: { root: string; toolsDir: string; target: number; memory: MemoryBudget },
): Promise<ImageRow> {
  const scratch = await mkdtemp(join(tmpdir(), `tamp-corpus-${image.name}-`));
  try {
    const files = await prepare(image, options.root, scratch);
    const reference = files.sourceOnWhite;
    const tamp = await runTamp(files, reference, options.target, options.memory);
    const auto = tamp.get('auto')!;
    const transparent = !(await sharp(files.sourcePng).stats()).isOpaque;
    // Held to what the compared Tamp output scored, capped at the target (see the header).
    const heldTo = (output: TampOutput) => Math.min(options.target, output.ssim);

    const references: ImageRow['references'] = {};
    let bestReference: ImageRow['bestReference'];
    const formatRatios: ImageRow['formatRatios'] = {};
    for (const encoder of referenceEncoders(files, options.toolsDir)) {
      const search = new ReferenceSearch(encoder, reference);
      const atTarget = await search.smallestMeeting(options.target);
      const atAuto = await search.smallestMeeting(heldTo(auto));
      const own = tamp.get(TAMP_FORMAT_OF[encoder.name]!)!;
      const atOwnFormat = await search.smallestMeeting(heldTo(own));
      references[encoder.name] = {
        atTarget,
        atAuto,
        atOwnFormat,
        cpuMs: search.cpuMs,
        probes: search.probes.size,
      };
      formatRatios[encoder.name] = atOwnFormat ? own.bytes / atOwnFormat.bytes : undefined;
      // A JPEG drops the transparency (it is scored on white): not a result for such an image,
      // which Tamp's auto does not give a JPEG either.
      const keepsTransparency = !transparent || encoder.name !== 'mozjpeg';
      if (keepsTransparency && atAuto && (!bestReference || atAuto.bytes < bestReference.bytes)) {
        bestReference = { name: encoder.name, bytes: atAuto.bytes, ssimHeld: heldTo(auto) };
      }
    }
    const metadata = await sharp(files.sourcePng).metadata();
    return {
      name: image.name,
      kind: image.kind,
      debianPackage: image.debianPackage,
      path: image.path,
      width: metadata.width!,
      height: metadata.height!,
      megapixels: (metadata.width! * metadata.height!) / 1e6,
      transparent,
      inputBytes: (await stat(files.input)).size,
      target: options.target,
      tamp: Object.fromEntries(tamp),
      references,
      bestReference,
      ratio: bestReference ? auto.bytes / bestReference.bytes : undefined,
      formatRatios,
    };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

const kb = (bytes: number | undefined) => (bytes === undefined ? '–' : (bytes / 1000).toFixed(1));
const fixed = (value: number | undefined, digits: number) =>
  value === undefined ? '–' : value.toFixed(digits);
const percent = (part: number, whole: number) =>
  whole === 0 ? '–' : `${part}/${whole} (${Math.round((part * 100) / whole)} %)`;

function printTable(rows: ImageRow[], target: number): void {
  const columns: [string, number, (row: ImageRow) => string][] = [
    ['image', 16, (row) => row.name],
    ['kind', 8, (row) => `${row.kind}${row.transparent ? '*' : ''}`],
    ['MP', 5, (row) => row.megapixels.toFixed(2)],
    ['input kB', 8, (row) => kb(row.inputBytes)],
    ['cwebp', 7, (row) => kb(row.references.cwebp?.atAuto?.bytes)],
    ['avifenc', 7, (row) => kb(row.references.avifenc?.atAuto?.bytes)],
    ['mozjpeg', 7, (row) => kb(row.references.mozjpeg?.atAuto?.bytes)],
    ['T webp', 7, (row) => kb(row.tamp.webp?.bytes)],
    ['T avif', 7, (row) => kb(row.tamp.avif?.bytes)],
    ['T jpeg', 7, (row) => kb(row.tamp.jpeg?.bytes)],
    ['T auto', 7, (row) => kb(row.tamp.auto?.bytes)],
    [
      'auto is',
      12,
      (row) => {
        const auto = row.tamp.auto!;
        const lossless = auto.candidates.find(
          (candidate) => candidate.format === auto.format && candidate.quality === undefined,
        );
        return auto.keptInput
          ? `input ${auto.format}`
          : `${auto.format}${lossless ? ' lossless' : ''}`;
      },
    ],
    ['auto ssim', 9, (row) => fixed(row.tamp.auto?.ssim, 4)],
    ['held to', 7, (row) => fixed(row.bestReference?.ssimHeld, 4)],
    ['ratio', 5, (row) => fixed(row.ratio, 2)],
    ['best ref', 8, (row) => row.bestReference?.name ?? '–'],
    ['auto wall s', 11, (row) => fixed((row.tamp.auto?.wallMs ?? 0) / 1000, 1)],
    ['auto cpu s', 10, (row) => fixed((row.tamp.auto?.cpuMs ?? 0) / 1000, 1)],
    ['q80 cpu s', 9, (row) => fixed((row.tamp['webp q80']?.cpuMs ?? 0) / 1000, 2)],
    [
      'refs cpu s',
      10,
      (row) => fixed(Object.values(row.references).reduce((sum, r) => sum + r.cpuMs, 0) / 1000, 1),
    ],
  ];
  console.log(
    `\nSSIM target ${target} (ssim.js weber on luma, whole image on white). Bytes in kB; references at what auto scored, capped at the target ("held to"); * transparent: no JPEG among the references.`,
  );
  console.log(columns.map(([title, width]) => title.padStart(width)).join(' '));
  for (const row of rows) {
    console.log(columns.map(([, width, value]) => value(row).padStart(width)).join(' '));
  }

  console.log('\nEach Tamp fixed format against its own reference, at what that output scored:');
  console.log(
    `${'image'.padStart(16)} ${'webp ssim'.padStart(9)} ${'/cwebp'.padStart(7)} ${'avif ssim'.padStart(9)} ${'/avifenc'.padStart(8)} ${'jpeg ssim'.padStart(9)} ${'/mozjpeg'.padStart(8)}  cwebp, avifenc, mozjpeg settings at auto's score`,
  );
  for (const row of rows) {
    const settings = ['cwebp', 'avifenc', 'mozjpeg']
      .map((name) => row.references[name]?.atAuto?.setting ?? '–')
      .join(', ');
    console.log(
      `${row.name.padStart(16)} ${fixed(row.tamp.webp?.ssim, 4).padStart(9)} ${fixed(row.formatRatios.cwebp, 2).padStart(7)} ${fixed(row.tamp.avif?.ssim, 4).padStart(9)} ${fixed(row.formatRatios.avifenc, 2).padStart(8)} ${fixed(row.tamp.jpeg?.ssim, 4).padStart(9)} ${fixed(row.formatRatios.mozjpeg, 2).padStart(8)}  ${settings}`,
    );
  }

  console.log(
    "\nTamp auto's candidates (quality = the API's; bytes ~ = projected from the sample):",
  );
  for (const row of rows) {
    const candidates = row.tamp.auto!.candidates.map((candidate) => {
      const what = `${candidate.format}${candidate.lossless ? ' lossless' : ''}`;
      if (candidate.skipped) return `${what} skipped (${candidate.skipped})`;
      const quality = candidate.quality === undefined ? '' : ` q${candidate.quality}`;
      return `${what}${quality} ${candidate.estimated ? '~' : ''}${kb(candidate.bytes)} kB ssim ${fixed(candidate.ssim, 4)}`;
    });
    console.log(`${row.name.padStart(16)}: ${candidates.join('; ')}`);
  }

  printSummary(rows, target);
}

function printSummary(rows: ImageRow[], target: number): void {
  const fixedFormats = ['webp', 'avif', 'jpeg'] as const;
  const ratios = rows.flatMap((row) => (row.ratio === undefined ? [] : [row.ratio]));
  const autoAtMostBestFixed = rows.filter(
    (row) =>
      row.tamp.auto!.bytes <= Math.min(...fixedFormats.map((format) => row.tamp[format]!.bytes)),
  ).length;
  const autoBelowBestFixed = rows.filter(
    (row) =>
      row.tamp.auto!.bytes < Math.min(...fixedFormats.map((format) => row.tamp[format]!.bytes)),
  ).length;
  const totals = fixedFormats.map((format) => ({
    format,
    bytes: rows.reduce((sum, row) => sum + row.tamp[format]!.bytes, 0),
  }));
  const bestSingle = totals.sort((a, b) => a.bytes - b.bytes)[0]!;
  const autoBeatsBestSingle = rows.filter(
    (row) => row.tamp.auto!.bytes < row.tamp[bestSingle.format]!.bytes,
  ).length;
  const outputs = rows.flatMap((row) => Object.values(row.tamp).map((output) => ({ row, output })));
  const larger = outputs.filter(({ row, output }) => output.bytes > row.inputBytes);
  const searched = outputs.filter(({ output }) => output.mode !== 'webp q80');
  const missed = searched.filter(({ output }) => output.ssim < target - 0.0005);

  console.log('\nSummary');
  console.log(
    `  images: ${rows.length}, ${rows.reduce((s, r) => s + r.megapixels, 0).toFixed(1)} MP`,
  );
  console.log(
    `  Tamp auto / best reference at equal measured SSIM: median ${fixed(median(ratios), 3)}, ≤ 1.00 on ${percent(ratios.filter((ratio) => ratio <= 1).length, ratios.length)}, range ${fixed(Math.min(...ratios), 2)}–${fixed(Math.max(...ratios), 2)}`,
  );
  for (const name of ['cwebp', 'avifenc', 'mozjpeg']) {
    const own = rows.flatMap((row) => {
      const ratio = row.formatRatios[name];
      return ratio === undefined ? [] : [ratio];
    });
    console.log(
      `  Tamp ${TAMP_FORMAT_OF[name]} / ${name} (each at what Tamp's output scored): median ${fixed(median(own), 3)}, range ${fixed(Math.min(...own), 2)}–${fixed(Math.max(...own), 2)}`,
    );
  }
  console.log(
    `  auto ≤ every fixed format of Tamp on the same image: ${percent(autoAtMostBestFixed, rows.length)}; strictly smaller: ${percent(autoBelowBestFixed, rows.length)}`,
  );
  console.log(
    `  best single fixed format over the corpus: ${bestSingle.format} (${kb(bestSingle.bytes)} kB in all); auto smaller than it on ${percent(autoBeatsBestSingle, rows.length)}; auto in all ${kb(rows.reduce((s, r) => s + r.tamp.auto!.bytes, 0))} kB`,
  );
  console.log(
    `  never larger than the input: ${larger.length === 0 ? 'holds' : `FAILS on ${larger.map(({ row, output }) => `${row.name} ${output.mode}`).join(', ')}`} (${outputs.length} outputs; auto kept the input on ${rows.filter((row) => row.tamp.auto!.keptInput).length})`,
  );
  console.log(
    `  Tamp outputs below the target by ssim.js (whole image): ${missed.length}/${searched.length}${missed.length > 0 ? `: ${missed.map(({ row, output }) => `${row.name} ${output.mode} ${output.ssim.toFixed(4)}`).join(', ')}` : ''}`,
  );
  const buckets: [string, (mp: number) => boolean][] = [
    ['< 0.5 MP', (mp) => mp < 0.5],
    ['0.5–2 MP', (mp) => mp >= 0.5 && mp < 2],
    ['≥ 2 MP', (mp) => mp >= 2],
  ];
  console.log('  CPU of the search (auto) over one plain WebP q80 encode, per image size:');
  for (const [label, inBucket] of buckets) {
    const bucket = rows.filter((row) => inBucket(row.megapixels));
    if (bucket.length === 0) continue;
    const extra = bucket.map((row) => row.tamp.auto!.cpuMs - row.tamp['webp q80']!.cpuMs);
    const times = bucket.map((row) => row.tamp.auto!.cpuMs / row.tamp['webp q80']!.cpuMs);
    const perMp = bucket.map(
      (row) => (row.tamp.auto!.cpuMs - row.tamp['webp q80']!.cpuMs) / row.megapixels,
    );
    console.log(
      `    ${label.padEnd(9)} ${bucket.length} images: median +${fixed((median(extra) ?? 0) / 1000, 2)} s CPU (${fixed(median(times), 1)}× the plain encode), ${fixed((median(perMp) ?? 0) / 1000, 2)} s per MP`,
    );
  }
}

/**
 * mozjpeg's WebAssembly module, from the package's own file: Node's fetch cannot read the
 * file: URL the module would fetch by default, and Emscripten takes the bytes as wasmBinary.
 */
async function initMozjpeg(): Promise<void> {
  const wasmPath = createRequire(import.meta.url).resolve(
    '@jsquash/jpeg/codec/enc/mozjpeg_enc.wasm',
  );
  const wasmBinary = await readFile(wasmPath);
  // The package's types list only some of Emscripten's module options.
  await initMozjpegModule({ wasmBinary } as Parameters<typeof initMozjpegModule>[0]);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      ssim: { type: 'string', default: '0.98' },
      only: { type: 'string' },
      'time-limit-s': { type: 'string', default: '1800' },
      json: { type: 'string' },
      /** Where the corpus packages' files are (their paths under it): / once provisioned. */
      root: { type: 'string', default: '/' },
      /** Where cwebp and avifenc are linked: .tools/bin once provisioned. */
      'tools-dir': { type: 'string', default: TOOLS_BIN },
      'no-provision': { type: 'boolean', default: false },
    },
  });
  const target = Number(values.ssim);
  const timeLimitMs = Number(values['time-limit-s']) * 1000;
  const only = values.only?.split(',');
  const images = await corpusImages({
    only,
    root: values.root,
    provision: !values['no-provision'],
  });
  const { stdout: commit } = await execFile('git', ['rev-parse', '--short', 'HEAD']);
  console.log(
    `image-corpus at ${commit.trim()}, ${new Date().toISOString()}, SSIM target ${target}`,
  );
  sharp.cache(false);
  await initMozjpeg();
  const memory = new MemoryBudget(320 * MiB);
  const startedAt = performance.now();
  const rows: ImageRow[] = [];
  for (const image of images) {
    if (performance.now() - startedAt > timeLimitMs) {
      console.error(`time limit reached: ${image.name} and the images after it not measured`);
      break;
    }
    const imageStartedAt = performance.now();
    const row = await measureImage(image, {
      root: values.root,
      toolsDir: values['tools-dir'],
      target,
      memory,
    });
    rows.push(row);
    console.error(
      `${image.name}: ${row.width}×${row.height}, auto ${row.tamp.auto!.format} ${kb(row.tamp.auto!.bytes)} kB, best reference ${row.bestReference?.name} ${kb(row.bestReference?.bytes)} kB, ratio ${fixed(row.ratio, 2)} (${Math.round((performance.now() - imageStartedAt) / 1000)} s)`,
    );
  }
  printTable(rows, target);
  if (values.json) await writeFile(values.json, `${JSON.stringify(rows, null, 2)}\n`);
}

await main();
