/**
 * What `format: "auto"` chooses and costs for audio (services/worker-audio/README.md#auto), in
 * the worker's own processAudio, in this process: per clip, the class it heard, the encoding it
 * chose and the bytes and CPU time of the job, against two fixed encodes:
 * - Opus 24 kbit/s mono, the encode a chain without one gets (and the spec's podcast rate),
 * - Opus 64 kbit/s stereo, a fixed setting fit for music.
 *
 * Clips: espeak-ng speech (plain, a stereo podcast-like MP3 with pauses and room noise, a fast
 * lecture) and ffmpeg-synthesised music (stereo chords, a staccato melody with percussion, a drum
 * loop), the test fixtures; `--files a.ogg,b.flac` adds real recordings (decoded to WAV first).
 * CPU is this process's and every ffmpeg/ffprobe it started (/proc, 10 ms ticks), the median of
 * `--runs` runs; the output's loudness scan is left out, as in the fixed runs.
 *
 *   node --import tsx scripts/bench/audio-auto.ts [--runs 3] [--files path,…]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import type { AudioEncodeOperation } from '@tamp/proto';
import { createFfmpegRunner } from '../../services/worker-audio/src/adapters/ffmpeg-runner';
import { runTool } from '../../services/worker-audio/src/adapters/tool-process';
import { generateMusicFixture } from '../fixtures/music';
import { generateSpeechFixture, PODCAST_SPEECH } from '../fixtures/speech';
import { toolCommand } from '../infra/provision';
import { cpuSecondsOf } from './process-cpu';

const MODES: { name: string; encode: AudioEncodeOperation }[] = [
  {
    name: 'auto',
    encode: { type: 'encode', params: { format: 'auto', bitrate: 24, channels: 1 } },
  },
  { name: 'opus 24k mono', encode: opus(24, 1) },
  { name: 'opus 64k stereo', encode: opus(64, 2) },
];

function opus(bitrate: number, channels: number): AudioEncodeOperation {
  return { type: 'encode', params: { format: 'opus', bitrate, channels } };
}

function cpuMsSoFar(): number {
  return (cpuSecondsOf([{ name: 'self', pid: process.pid }]).get('self') ?? 0) * 1000;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function clips(dir: string, files: readonly string[]): Promise<[string, string][]> {
  const [speech, podcast, lecture] = await Promise.all([
    generateSpeechFixture(dir, 'speech'),
    generateSpeechFixture(dir, 'podcast', PODCAST_SPEECH),
    generateSpeechFixture(dir, 'lecture', { wordsPerMinute: 210, pauseSec: 0.7 }),
  ]);
  const found: [string, string][] = [
    ['speech (wav)', speech.wavPath],
    ['podcast (mp3)', podcast.mp3Path!],
    ['lecture (wav)', lecture.wavPath],
  ];
  for (const kind of ['chords', 'staccato', 'drums'] as const) {
    found.push([`${kind} (wav)`, await generateMusicFixture(dir, kind, kind)]);
  }
  for (const file of files) {
    // Jobs take WAV and MP3 only: other recordings are decoded first.
    const wav = join(dir, `${basename(file)}.wav`);
    await runTool(toolCommand('ffmpeg'), [
      ...['-nostdin', '-loglevel', 'error', '-y', '-i', `file:${file}`],
      ...['-c:a', 'pcm_s16le', `file:${wav}`],
    ]);
    found.push([basename(file), wav]);
  }
  return found;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { runs: { type: 'string', default: '3' }, files: { type: 'string', default: '' } },
  });
  const runs = Number(values.runs);
  const dir = await mkdtemp(join(tmpdir(), 'tamp-bench-audio-auto-'));
  const runner = createFfmpegRunner({
    ffmpegPath: toolCommand('ffmpeg'),
    ffprobePath: toolCommand('ffprobe'),
  });
  try {
    console.log(
      '| Clip | Input bytes | Class (pauses, modulation dB, beat, correlation) | Mode | Settings | Bytes | CPU ms |',
    );
    console.log('| --- | --: | --- | --- | --- | --: | --: |');
    for (const [name, path] of await clips(dir, values.files.split(',').filter(Boolean))) {
      for (const mode of MODES) {
        const cpu: number[] = [];
        let result: Awaited<ReturnType<typeof runner.processAudio>> | undefined;
        for (let run = 0; run < runs; run++) {
          const before = cpuMsSoFar();
          result = await runner.processAudio({
            inputPath: path,
            outputPath: join(dir, 'output'),
            operations: [mode.encode],
            workDir: join(dir, 'work'),
            measureOutputLoudness: false,
          });
          cpu.push(cpuMsSoFar() - before);
        }
        const { auto, keptInput } = result!;
        const heard =
          auto === undefined
            ? ''
            : `${auto.class} (${auto.measures.pauseShare}, ${auto.measures.envelopeModulationDb}, ${auto.measures.beatRegularity}, ${auto.measures.stereoCorrelation})`;
        const encode = mode.encode.params;
        const settings = keptInput
          ? `input kept (${result!.format})`
          : auto === undefined
            ? `${encode.format} ${encode.bitrate}k ${encode.channels === 2 ? 'stereo' : 'mono'}`
            : `opus ${auto.application} ${auto.bitrate}k ${auto.channels === 2 ? 'stereo' : 'mono'}`;
        console.log(
          `| ${name} | ${result!.inputSize.toLocaleString('en')} | ${heard} | ${mode.name} | ${settings} | ${result!.outputSize.toLocaleString('en')} | ${Math.round(median(cpu))} |`,
        );
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
