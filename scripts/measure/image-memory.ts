/**
 * Measures what services/worker-image/src/domain/memory-model.ts assumes: peak memory per pixel
 * of each libvips decoder and encoder mode, and prints it beside the model's figure.
 *
 * Each case runs in its own Node process (VmHWM is a per-process peak), with sharp's cache off
 * and jemalloc preloaded as in the worker, at two sizes of the same fixture photo with sensor
 * noise at JPEG quality 98 (the content that makes encoders hold the most), re-encoded as
 * progressive JPEG, PNG, interlaced PNG and WebP for the decoder cases. The per-pixel figure
 * is the slope between the two sizes, so libvips' fixed start-up cost (thread pool, first
 * allocations) does not inflate it; that cost is printed as the intercept, to compare with
 * JOB_OVERHEAD_BYTES.
 *
 * Run: node --import tsx scripts/measure/image-memory.ts [--width 4000 --height 3000] [--only webp,jpeg]
 * (the second size is half as wide and high; --only keeps the rows whose name contains one of the words)
 * A row marked "over" means the model under-estimates that case: raise the figure in the
 * model (the budget then admits fewer jobs at once, which is the safe direction).
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { parseArgs, promisify } from 'node:util';
import sharp from 'sharp';
import { recommendedImageWorkerEnv } from '../../services/worker-image/src/adapters/sharp-runtime';
import {
  type EncodeSettings,
  encodeSettingsFor,
  losslessEncodeSettings,
} from '../../services/worker-image/src/domain/encode-settings';
import {
  bytesPerPixelAt,
  cheaperEncodeSettings,
  DECODER_BYTES_PER_PIXEL,
  type DecoderMemoryClass,
  ENCODER_BYTES_PER_PIXEL,
  type EncoderMemoryClass,
  encoderMemoryClass,
} from '../../services/worker-image/src/domain/memory-model';
import { ImageFixtures } from '../fixtures/images';
import { provisionTools } from '../infra/provision';

const run = promisify(execFile);

interface Case {
  input: string;
  output: string;
  /** Absent for decoder cases, which write libvips' streaming `.v` format. */
  settings?: EncodeSettings;
}

interface CaseResult {
  peakAboveIdleBytes: number;
  pixels: number;
}

// ---------------------------------------------------------------------------------------------
// child: one case

function peakRssBytes(): number {
  const match = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return Number(match?.[1] ?? 0) * 1024;
}

async function runCase(spec: Case): Promise<CaseResult> {
  sharp.cache(false);
  const idle = peakRssBytes();
  let image = sharp(spec.input, { failOn: 'error' });
  const settings = spec.settings;
  if (settings?.format === 'webp') image = image.webp(settings.options);
  if (settings?.format === 'avif') image = image.avif(settings.options);
  if (settings?.format === 'jpeg') image = image.jpeg(settings.options);
  if (settings?.format === 'png') image = image.png(settings.options);
  const info = await image.toFile(spec.output);
  return { peakAboveIdleBytes: peakRssBytes() - idle, pixels: info.width * info.height };
}

// ---------------------------------------------------------------------------------------------
// parent: fixtures, cases, table

/** Settings that put each encoder in the named mode at codec quality `quality`. */
function settingsFor(mode: EncoderMemoryClass, quality: number): EncodeSettings {
  const api = (format: 'webp' | 'avif' | 'jpeg' | 'png', effort = 4) =>
    encodeSettingsFor({ format, quality: Math.min(quality, 100), effort });
  const withQuality = (settings: EncodeSettings): EncodeSettings =>
    ({ ...settings, options: { ...settings.options, quality } }) as EncodeSettings;
  const jpegLadder = cheaperEncodeSettings(api('jpeg', 9));
  switch (mode) {
    case 'webp-single-pass':
      return { format: 'webp', options: { quality, effort: 2, smartSubsample: false } };
    case 'webp-multi-pass':
      return { format: 'webp', options: { quality, effort: 4, smartSubsample: false } };
    case 'webp-sharp-yuv':
      return { format: 'webp', options: { quality, effort: 4, smartSubsample: true } };
    case 'webp-lossless':
      return losslessEncodeSettings('webp', 4, false);
    case 'avif':
      return withQuality(api('avif'));
    case 'jpeg-progressive':
    case 'jpeg-optimised':
    case 'jpeg-baseline': {
      const found = jpegLadder.find((settings) => encoderMemoryClass(settings) === mode);
      if (!found) throw new Error(`no JPEG settings for ${mode}`);
      return withQuality(found);
    }
    case 'png':
      return encodeSettingsFor({ format: 'png', quality: 100, effort: 4 });
    case 'png-palette':
      return encodeSettingsFor({ format: 'png', quality: Math.min(quality, 99), effort: 4 });
  }
}

async function measure(spec: Case, env: NodeJS.ProcessEnv): Promise<CaseResult> {
  const { stdout } = await run(
    process.execPath,
    ['--import', 'tsx', import.meta.filename, '--child', JSON.stringify(spec)],
    { env, maxBuffer: 1024 * 1024 },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as CaseResult;
}

function row(cells: readonly string[]): string {
  const widths = [24, 8, 8, 10, 12, 6];
  return cells.map((cell, index) => cell.padEnd(widths[index] ?? 8)).join(' ');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      child: { type: 'string' },
      width: { type: 'string', default: '4000' },
      height: { type: 'string', default: '3000' },
      only: { type: 'string', default: '' },
    },
  });
  if (values.child) {
    console.log(JSON.stringify(await runCase(JSON.parse(values.child) as Case)));
    return;
  }

  // The worker runs on jemalloc, and sharp on glibc drops to one thread: figures measured without
  // it would not be the worker's.
  await provisionTools(['jemalloc']);
  const { LD_PRELOAD } = recommendedImageWorkerEnv();
  const env = { ...process.env, ...(existsSync(LD_PRELOAD) && { LD_PRELOAD }) };
  const width = Number(values.width);
  const height = Number(values.height);
  const fixtures = await ImageFixtures.create('tamp-image-memory-');
  try {
    const inputsAt = async (scale: 'full' | 'half') => {
      const jpeg = await fixtures.photo({
        width: scale === 'full' ? width : width / 2,
        height: scale === 'full' ? height : height / 2,
        quality: 98,
        seed: 5,
      });
      const path = (name: string) => fixtures.path(`${scale}-${name}`);
      const inputs: Record<DecoderMemoryClass, string> = {
        jpeg,
        'jpeg-progressive': path('progressive.jpg'),
        png: path('plain.png'),
        'png-interlaced': path('interlaced.png'),
        webp: path('photo.webp'),
        vips: path('photo.v'),
      };
      await sharp(jpeg).jpeg({ quality: 98, progressive: true }).toFile(inputs['jpeg-progressive']);
      await sharp(jpeg).png().toFile(inputs.png);
      await sharp(jpeg).png({ progressive: true }).toFile(inputs['png-interlaced']);
      await sharp(jpeg).webp({ quality: 90 }).toFile(inputs.webp);
      await sharp(jpeg).toFile(inputs.vips);
      return inputs;
    };
    const full = await inputsAt('full');
    const half = await inputsAt('half');

    console.log(`image memory per pixel (slope between ${width}×${height} and half that)`);
    console.log(row(['mode', 'quality', 'model', 'measured', 'intercept', '']));
    const report = async (
      name: string,
      quality: string,
      model: number,
      spec: (inputs: Record<DecoderMemoryClass, string>) => Case,
    ) => {
      const wanted = values.only.split(',');
      if (!wanted.some((word) => name.includes(word))) return;
      const large = await measure(spec(full), env);
      const small = await measure(spec(half), env);
      const slope =
        (large.peakAboveIdleBytes - small.peakAboveIdleBytes) / (large.pixels - small.pixels);
      const intercept = large.peakAboveIdleBytes - slope * large.pixels;
      const verdict = slope > model ? 'over' : '';
      console.log(
        row([
          name,
          quality,
          model.toFixed(2),
          slope.toFixed(2),
          `${(intercept / 1024 / 1024).toFixed(0)} MiB`,
          verdict,
        ]),
      );
    };

    for (const decoder of Object.keys(full) as DecoderMemoryClass[]) {
      await report(`decode ${decoder}`, '-', DECODER_BYTES_PER_PIXEL[decoder], (inputs) => ({
        input: inputs[decoder],
        output: fixtures.path('decoded.v'),
      }));
    }
    for (const [mode, curve] of Object.entries(ENCODER_BYTES_PER_PIXEL) as [
      EncoderMemoryClass,
      (typeof ENCODER_BYTES_PER_PIXEL)[EncoderMemoryClass],
    ][]) {
      for (const [quality] of curve) {
        const settings = settingsFor(mode, quality);
        if (encoderMemoryClass(settings) !== mode) throw new Error(`settings are not ${mode}`);
        await report(mode, String(quality), bytesPerPixelAt(curve, quality), (inputs) => ({
          input: inputs.jpeg,
          output: fixtures.path('encoded'),
          settings,
        }));
      }
    }
  } finally {
    await rm(fixtures.dir, { recursive: true, force: true });
  }
}

await main();
