/**
 * Measures the peak memory of a realistic big job: a ~100 MB WAV (44.1 kHz stereo 16-bit,
 * ~9.5 min) through a preset chain. Not part of the test suite (it takes minutes); run with
 *   npx tsx scripts/measure/audio-peak-rss.ts [seconds] [preset]
 * ffmpeg is wrapped in GNU time so every pass's max RSS is recorded.
 */
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createFfmpegRunner } from '../../services/worker-audio/src/adapters/ffmpeg-runner';
import { SPEC_PRESET_CHAINS } from '../fixtures/audio-operations';
import { generateLongWav } from '../fixtures/speech';
import { provisionTools, toolCommand, toolPath } from '../infra/provision';

const seconds = Number(process.argv[2] ?? 567);
const presetName = process.argv[3] ?? 'aggressive';
const chain = SPEC_PRESET_CHAINS[presetName];
if (!chain) throw new Error(`unknown preset ${presetName}`);
await provisionTools(['speech', 'time']);

const dir = await mkdtemp(join(tmpdir(), 'tamp-audio-rss-'));
try {
  const input = join(dir, 'long.wav');
  await generateLongWav(input, seconds);
  const rssLog = join(dir, 'ffmpeg-rss.log');
  const wrapper = join(dir, 'ffmpeg-timed.sh');
  const ffmpeg = toolCommand('ffmpeg');
  await writeFile(
    wrapper,
    `#!/bin/sh\nexec '${toolPath('time')}' -a -o '${rssLog}' -f '%M' '${ffmpeg}' "$@"\n`,
  );
  await chmod(wrapper, 0o755);

  const runner = createFfmpegRunner({ ffmpegPath: wrapper, ffprobePath: toolCommand('ffprobe') });
  const rssBefore = process.memoryUsage().rss;
  const started = performance.now();
  let heartbeats = 0;
  const result = await runner.processAudio({
    inputPath: input,
    outputPath: join(dir, 'out.ogg'),
    operations: chain,
    workDir: join(dir, 'work'),
    onProgress: () => heartbeats++,
  });
  const elapsedSec = (performance.now() - started) / 1000;
  const ffmpegPeaksKb = (await readFile(rssLog, 'utf8'))
    .split('\n')
    .map((line) => Number.parseInt(line, 10))
    .filter(Number.isFinite);
  console.log(
    JSON.stringify(
      {
        preset: presetName,
        inputBytes: (await stat(input)).size,
        ...result,
        elapsedSec: Number(elapsedSec.toFixed(1)),
        heartbeats,
        ffmpegPeakRssMbPerPass: ffmpegPeaksKb.map((kb) => Number((kb / 1024).toFixed(1))),
        nodeRssMbBefore: Number((rssBefore / 2 ** 20).toFixed(1)),
        nodePeakRssMb: Number((process.resourceUsage().maxRSS / 1024).toFixed(1)),
      },
      null,
      2,
    ),
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
