import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AudioPresetName, audioPipeline, expandPreset } from '@tamp/proto';
import { generateLongWav } from '@tamp/scripts/fixtures/speech';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFfmpegRunner } from '../src/adapters/ffmpeg-runner';
import { commandCpuMs, meanCpuCost, type ToolRun, timedTools } from './support/job-cost';

/**
 * What one audio job costs in CPU (the worker and every ffmpeg/ffprobe it starts), against one
 * plain ffmpeg command that runs the job's final filters and encode. Inputs as the job-cost
 * bench makes them: looped espeak speech, mono 44.1 kHz WAV. Each process of Debian's ffmpeg
 * costs ~60 ms before it reads a byte, the pinned static build's ~1 ms (README, "Cost per job");
 * the processes a job starts are what is pinned, and the printed table is the README's. ffmpeg
 * and ffprobe are the ones on PATH, the pinned pair first (vitest.config.ts).
 */

/** ffprobe; silences + level estimate; -16 LUFS at two gains, each through the compressor; the
 * make-up gain at two gains; encode; ffprobe and loudness of the output. */
const PODCAST_PROCESSES = ['ffprobe', 'ffmpeg', 'ffmpeg', 'ffmpeg', 'ffmpeg', 'ffprobe', 'ffmpeg'];
/** ffprobe; silences + level estimate; -14 LUFS at two gains; encode; ffprobe and loudness. */
const LECTURE_PROCESSES = ['ffprobe', 'ffmpeg', 'ffmpeg', 'ffmpeg', 'ffprobe', 'ffmpeg'];

const CASES: { preset: AudioPresetName; seconds: 1 | 20; processes: string[] }[] = [
  { preset: 'podcast', seconds: 1, processes: PODCAST_PROCESSES },
  { preset: 'podcast', seconds: 20, processes: PODCAST_PROCESSES },
  { preset: 'lecture', seconds: 1, processes: LECTURE_PROCESSES },
  { preset: 'lecture', seconds: 20, processes: LECTURE_PROCESSES },
];
/** Enough runs that the 10 ms accounting ticks average out. */
const REPETITIONS = { 1: 5, 20: 2 } as const;

let dir: string;
const wavs = new Map<number, string>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tamp-audio-cost-'));
  for (const seconds of [1, 20]) {
    const path = join(dir, `speech-${seconds}s.wav`);
    await generateLongWav(path, seconds, { channels: 1 });
    wavs.set(seconds, path);
  }
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Mean CPU per position in the job's sequence of processes, over several identical jobs. */
function meanPerProcess(jobs: ToolRun[][]): ToolRun[] {
  const first = jobs[0] ?? [];
  return first.map((run, index) => ({
    ...run,
    cpuMs: jobs.reduce((sum, runs) => sum + (runs[index]?.cpuMs ?? 0), 0) / jobs.length,
  }));
}

describe('CPU per job', () => {
  it.each(CASES)('$preset on $seconds s of speech', async ({ preset, seconds, processes }) => {
    const inputPath = wavs.get(seconds)!;
    const operations = expandPreset(audioPipeline, preset);
    const repetitions = REPETITIONS[seconds];
    const tools = await timedTools(dir);
    const request = {
      inputPath,
      outputPath: join(dir, `${preset}-${seconds}.ogg`),
      operations,
      workDir: join(dir, 'work'),
    };
    const timedRunner = createFfmpegRunner(tools);
    const runner = createFfmpegRunner();

    await runner.processAudio(request); // warm-up: the runner's code and ffmpeg's libraries loaded
    const jobs: ToolRun[][] = [];
    for (let run = 0; run < repetitions; run++) {
      await timedRunner.processAudio(request);
      jobs.push(await tools.takeRuns());
    }
    const perProcess = meanPerProcess(jobs);
    const cost = await meanCpuCost(() => runner.processAudio(request), repetitions);

    const encode = perProcess.find((run) => run.commandLine.includes(' -c:a '))!;
    expect(dir).not.toMatch(/\s/); // the recorded command line splits back into its arguments
    const baselineMs = await commandCpuMs('ffmpeg', encode.commandLine.split(' '), repetitions);

    console.info(
      [
        `${preset} ${seconds}s: ${perProcess.length} processes, ${cost.totalMs.toFixed(0)} ms CPU per job ` +
          `(worker ${cost.ownMs.toFixed(0)}, children ${cost.childrenMs.toFixed(0)}); ` +
          `one command ${baselineMs.toFixed(0)} ms; ratio ${(cost.totalMs / baselineMs).toFixed(2)}`,
        ...perProcess.map(
          (run) => `  ${run.cpuMs.toFixed(0).padStart(5)} ms  ${run.tool} ${run.commandLine}`,
        ),
      ].join('\n'),
    );
    // CPU time itself is too noisy on a shared machine to assert; the processes are the cost.
    expect(perProcess.map((run) => run.tool)).toEqual(processes);
  });
});
