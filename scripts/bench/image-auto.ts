/**
 * What `format: "auto"` costs over a fixed encode (services/worker-image/README.md#auto-and-
 * perceptual-targets), in the worker's own processImage, in this process: per image size, the
 * wall time and CPU time (user + system, libvips' threads included) of
 * - a fixed WebP at quality 80 (the `medium` preset's encode),
 * - auto without AVIF (accept webp, jpeg: what can run inline),
 * - auto (AVIF too; the target is what JPEG at quality 80 scores on the image),
 * and what each wrote: format, bytes, SSIM against the resized input.
 *
 * Photo-like fixtures with sensor noise (ImageFixtures.photo, JPEG q92), encode only, effort 4,
 * the worker's default 320 MiB memory budget. One run per cell: CPU time is the figure to read,
 * wall time moves with whatever else the machine runs. Nothing to provision.
 *
 *   node --import tsx scripts/bench/image-auto.ts [--sizes 640x480,1600x1200,4000x3000]
 */
import { parseArgs } from 'node:util';
import type { ImageOperation } from '@tamp/proto';
import sharp from 'sharp';
import { processImage } from '../../services/worker-image/src/adapters/sharp-pipeline';
import { MemoryBudget } from '../../services/worker-image/src/domain/memory-budget';
import { ImageFixtures } from '../fixtures/images';

const MiB = 1024 * 1024;

const MODES: { name: string; params: Record<string, unknown> }[] = [
  { name: 'webp q80', params: { format: 'webp', quality: 80, effort: 4 } },
  {
    name: 'auto, no avif',
    params: { format: 'auto', quality: 80, effort: 4, accept: ['webp', 'jpeg'] },
  },
  { name: 'auto', params: { format: 'auto', quality: 80, effort: 4 } },
];

function cell(value: string | number, width: number): string {
  return String(value).padStart(width);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { sizes: { type: 'string', default: '640x480,1600x1200,4000x3000' } },
  });
  sharp.cache(false);
  const memory = new MemoryBudget(320 * MiB);
  const fixtures = await ImageFixtures.create('tamp-bench-auto-');
  try {
    console.log(
      `${'size'.padEnd(11)} ${'mode'.padEnd(14)} ${cell('wall ms', 8)} ${cell('cpu ms', 8)} ${cell('× cpu', 6)}  ${'format'.padEnd(6)} ${cell('bytes', 9)} ${cell('ssim', 7)}  skipped`,
    );
    for (const size of values.sizes.split(',')) {
      const [width, height] = size.split('x').map(Number) as [number, number];
      const input = await fixtures.photo({ width, height, seed: 5 });
      let fixedCpu = 0;
      for (const [index, mode] of MODES.entries()) {
        const operations = [{ type: 'encode', params: mode.params }] as ImageOperation[];
        const cpuBefore = process.cpuUsage();
        const startedAt = performance.now();
        const result = await processImage({
          inputPath: input,
          outputPath: fixtures.path(`out-${size}-${index}`),
          operations,
          limitInputPixels: 100_000_000,
          memory,
        });
        const wall = performance.now() - startedAt;
        const cpu = process.cpuUsage(cpuBefore);
        const cpuMs = (cpu.user + cpu.system) / 1000;
        if (index === 0) fixedCpu = cpuMs;
        const skipped = (result.candidates ?? [])
          .filter((candidate) => candidate.skipped)
          .map((candidate) => `${candidate.format} (${candidate.skipped})`)
          .join(', ');
        console.log(
          `${size.padEnd(11)} ${mode.name.padEnd(14)} ${cell(Math.round(wall), 8)} ${cell(Math.round(cpuMs), 8)} ${cell((cpuMs / fixedCpu).toFixed(1), 6)}  ${result.format.padEnd(6)} ${cell(result.outputSize, 9)} ${cell(result.ssim?.toFixed(4) ?? '-', 7)}  ${skipped}`,
        );
      }
    }
  } finally {
    await fixtures.cleanup();
  }
}

await main();
