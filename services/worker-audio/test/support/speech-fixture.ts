import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { runTool } from '../../src/adapters/tool-process';
import { formatNumber } from '../../src/domain/audio-filters';

/**
 * Test fixtures made at test time from espeak-ng speech, so no audio binaries live in git
 * and every property a test relies on (where the pauses are, how long the speech is) is known
 * exactly rather than eyeballed.
 */

export const DEFAULT_SENTENCES: readonly string[] = [
  'The quick brown fox jumps over the lazy dog.',
  'Compression makes audio smaller without losing what matters to the listener.',
  'Every spoken word should survive, even when long pauses are removed.',
  'This recording was generated automatically for a test.',
  'Loudness is measured in units relative to full scale.',
  'A podcast usually aims for about minus sixteen.',
  'Speeding up a lecture saves time but keeps the voice natural.',
  'Thank you for listening to this short example.',
];

export interface SpeechFixtureOptions {
  sentences?: readonly string[];
  /** Silence inserted between consecutive sentences, seconds. Default 0. */
  pauseSec?: number;
  /**
   * Gain per sentence in dB, cycled (e.g. [0, -20] alternates loud and quiet sentences).
   * Default: all 0.
   */
  sentenceGainsDb?: readonly number[];
  /** Peak level of white noise filling the inserted pauses; null for digital silence. */
  pauseNoiseDb?: number | null;
  sampleRate?: 44_100 | 48_000;
  channels?: 1 | 2;
  /** Also write an MP3 next to the WAV. Default false. */
  mp3?: boolean;
  /** espeak-ng voice speed, words per minute. */
  wordsPerMinute?: number;
}

export interface SpeechFixture {
  wavPath: string;
  mp3Path: string | null;
  durationSec: number;
  /** Sum of the spoken sentences' durations (espeak's own short pauses included). */
  speechSec: number;
  /** Total seconds of inserted pauses. */
  insertedSilenceSec: number;
  sentenceCount: number;
}

const ffmpeg = () => process.env.FFMPEG_PATH ?? 'ffmpeg';
const ffprobe = () => process.env.FFPROBE_PATH ?? 'ffprobe';

export async function probeDurationSec(path: string): Promise<number> {
  const { stdout } = await runTool(ffprobe(), [
    '-v',
    'error',
    '-show_entries',
    'format=duration',
    '-of',
    'csv=p=0',
    `file:${path}`,
  ]);
  const duration = Number.parseFloat(stdout.trim());
  if (!Number.isFinite(duration)) throw new Error(`cannot read the duration of ${path}`);
  return duration;
}

/** Writes `<dir>/<name>.wav` (PCM 16-bit) and optionally `<dir>/<name>.mp3`. */
export async function generateSpeechFixture(
  dir: string,
  name: string,
  options: SpeechFixtureOptions = {},
): Promise<SpeechFixture> {
  const sentences = options.sentences ?? DEFAULT_SENTENCES;
  const pauseSec = options.pauseSec ?? 0;
  const gains = options.sentenceGainsDb?.length ? options.sentenceGainsDb : [0];
  const sampleRate = options.sampleRate ?? 44_100;
  const channels = options.channels ?? 1;
  const pauseNoiseDb = options.pauseNoiseDb ?? null;

  await mkdir(dir, { recursive: true });
  const scratch = await mkdtemp(join(dir, `${name}-parts-`));
  try {
    const parts = sentences.map((_, index) => join(scratch, `sentence-${index}.wav`));
    await Promise.all(
      sentences.map((sentence, index) =>
        runTool('espeak-ng', [
          '-s',
          String(options.wordsPerMinute ?? 165),
          '-w',
          parts[index]!,
          sentence,
        ]),
      ),
    );
    const durations = await Promise.all(parts.map(probeDurationSec));
    const speechSec = durations.reduce((sum, value) => sum + value, 0);

    const layout = channels === 2 ? 'stereo' : 'mono';
    const chains: string[] = [];
    const concatInputs: string[] = [];
    parts.forEach((_, index) => {
      const gain = gains[index % gains.length] ?? 0;
      chains.push(
        `[${index}:a]aresample=${sampleRate},aformat=sample_fmts=fltp:channel_layouts=${layout},volume=${gain}dB[s${index}]`,
      );
      concatInputs.push(`[s${index}]`);
      if (pauseSec > 0 && index < parts.length - 1) {
        const source =
          pauseNoiseDb === null
            ? `anullsrc=r=${sampleRate}:cl=${layout}`
            : `anoisesrc=r=${sampleRate}:c=white:a=${formatNumber(10 ** (pauseNoiseDb / 20), 8)}:seed=${index + 1},aformat=sample_fmts=fltp:channel_layouts=${layout}`;
        chains.push(`${source},atrim=duration=${pauseSec}[p${index}]`);
        concatInputs.push(`[p${index}]`);
      }
    });
    chains.push(`${concatInputs.join('')}concat=n=${concatInputs.length}:v=0:a=1[out]`);

    const wavPath = join(dir, `${name}.wav`);
    await runTool(ffmpeg(), [
      '-nostdin',
      '-hide_banner',
      '-loglevel',
      'error',
      '-y',
      ...parts.flatMap((part) => ['-i', `file:${part}`]),
      '-filter_complex',
      chains.join(';'),
      '-map',
      '[out]',
      '-c:a',
      'pcm_s16le',
      '-ar',
      String(sampleRate),
      `file:${wavPath}`,
    ]);

    let mp3Path: string | null = null;
    if (options.mp3) {
      mp3Path = join(dir, `${name}.mp3`);
      await runTool(ffmpeg(), [
        '-nostdin',
        '-hide_banner',
        '-loglevel',
        'error',
        '-y',
        '-i',
        `file:${wavPath}`,
        '-c:a',
        'libmp3lame',
        '-b:a',
        '128k',
        `file:${mp3Path}`,
      ]);
    }

    const insertedSilenceSec = pauseSec > 0 ? pauseSec * (parts.length - 1) : 0;
    return {
      wavPath,
      mp3Path,
      durationSec: await probeDurationSec(wavPath),
      speechSec,
      insertedSilenceSec,
      sentenceCount: parts.length,
    };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * A long PCM 16-bit WAV for size and memory tests: the default speech fixture looped, so the
 * content stays speech-like (pauses, level changes) at any length. 44.1 kHz stereo by default:
 * 176,400 bytes per second, so about 570 s gives a 100 MB file.
 */
export async function generateLongWav(
  path: string,
  seconds: number,
  options: { sampleRate?: 44_100 | 48_000; channels?: 1 | 2 } = {},
): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const scratch = await mkdtemp(join(dir, 'long-wav-'));
  try {
    const seed = await generateSpeechFixture(scratch, 'seed', {
      pauseSec: 1.5,
      sentenceGainsDb: [0, -6, -12, -3],
      pauseNoiseDb: -70,
      sampleRate: options.sampleRate ?? 44_100,
    });
    await runTool(ffmpeg(), [
      '-nostdin',
      '-hide_banner',
      '-loglevel',
      'error',
      '-y',
      '-stream_loop',
      '-1',
      '-i',
      `file:${seed.wavPath}`,
      '-t',
      String(seconds),
      '-ac',
      String(options.channels ?? 2),
      '-c:a',
      'pcm_s16le',
      `file:${path}`,
    ]);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
