import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AUDIO_AUTO_ENCODINGS, type AudioOperation } from '@tamp/proto';
import { op } from '@tamp/scripts/fixtures/audio-operations';
import { encodeMp3, generateMusicFixture, type MusicKind } from '@tamp/scripts/fixtures/music';
import { generateSpeechFixture, PODCAST_SPEECH } from '@tamp/scripts/fixtures/speech';
import { toolCommand } from '@tamp/scripts/infra/provision';
import { integratedLoudness } from '@tamp/scripts/measure/loudness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chooseAutoEncoding } from '../domain/auto-encoding';
import { type AudioProgress, createFfmpegRunner } from './ffmpeg-runner';

/**
 * format auto on real ffmpeg: the speech/music check on spoken (espeak-ng) and synthesised
 * music clips, the encoding it chooses, and never larger than the input.
 */

const AUTO: AudioOperation = {
  type: 'encode',
  params: { format: 'auto', bitrate: 24, channels: 1 },
};

let dir: string;
/** Every argument list the runner gave ffmpeg, one per line, tab-separated. */
let commandLog: string;
let runner: ReturnType<typeof createFfmpegRunner>;
const clips: Record<string, string> = {};
/** 8 kbit/s MP3 speech: smaller than any Opus encoding auto would choose. */
let tinyMp3: string;
/** The same with ID3 tags. */
let taggedMp3: string;

const SPEECH_CLIPS = ['speech', 'podcast', 'lecture'] as const;
const MUSIC_CLIPS: readonly MusicKind[] = ['chords', 'staccato', 'drums'];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tamp-audio-auto-'));
  // ffmpeg behind a script that logs its arguments: which encoder options the job really used.
  commandLog = join(dir, 'ffmpeg-commands.log');
  const wrapper = join(dir, 'ffmpeg-logged');
  await writeFile(
    wrapper,
    `#!/bin/sh\nfor a in "$@"; do printf '%s\\t' "$a"; done >> '${commandLog}'\necho >> '${commandLog}'\nexec ${toolCommand('ffmpeg')} "$@"\n`,
  );
  await chmod(wrapper, 0o755);
  runner = createFfmpegRunner({ ffmpegPath: wrapper });

  const [speech, podcast, lecture] = await Promise.all([
    generateSpeechFixture(dir, 'speech'),
    generateSpeechFixture(dir, 'podcast', PODCAST_SPEECH),
    generateSpeechFixture(dir, 'lecture', { wordsPerMinute: 210, pauseSec: 0.7 }),
  ]);
  clips.speech = speech.wavPath;
  clips.podcast = podcast.mp3Path!;
  clips.lecture = lecture.wavPath;
  for (const kind of MUSIC_CLIPS) clips[kind] = await generateMusicFixture(dir, kind, kind);
  tinyMp3 = await encodeMp3(speech.wavPath, join(dir, 'tiny.mp3'), {
    bitrateKbps: 8,
    sampleRate: 8_000,
  });
  taggedMp3 = await encodeMp3(speech.wavPath, join(dir, 'tagged.mp3'), {
    bitrateKbps: 8,
    sampleRate: 8_000,
    tags: { title: 'Private', artist: 'Someone' },
  });
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function runAuto(input: string, name: string, operations: AudioOperation[] = [AUTO]) {
  const outputPath = join(dir, `${name}.out`);
  await writeFile(commandLog, '');
  const progress: AudioProgress[] = [];
  const result = await runner.processAudio({
    inputPath: input,
    outputPath,
    operations,
    workDir: join(dir, 'work'),
    measureOutputLoudness: false,
    onProgress: (report) => progress.push(report),
  });
  const commands = (await readFile(commandLog, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split('\t'));
  const encode = commands.find((args) => args.includes('-c:a'));
  return { result, outputPath, encode, progress };
}

/** The value after `flag` in an argument list. */
function option(args: readonly string[] | undefined, flag: string): string | undefined {
  const at = args?.indexOf(flag) ?? -1;
  return at < 0 ? undefined : args?.[at + 1];
}

describe('the speech/music check', () => {
  it.each([
    ...SPEECH_CLIPS.map((clip) => [clip, 'speech'] as const),
    ...MUSIC_CLIPS.map((clip) => [clip, 'music'] as const),
  ])('hears %s as %s', async (clip, expected) => {
    const path = clips[clip]!;
    const { channels, sampleRate } = await runner.probeAudio(path);
    const choice = chooseAutoEncoding(await runner.analyseContent(path, { sampleRate }), channels);
    expect(choice.class, JSON.stringify(choice.measures)).toBe(expected);
  });
});

describe('an auto job', () => {
  it('encodes speech as mono voip Opus at the speech bitrate, at the level it came in', async () => {
    const { result, outputPath, encode, progress } = await runAuto(clips.podcast!, 'auto-speech');
    expect(result.auto).toMatchObject({ class: 'speech', application: 'voip' });
    // The analysis is a pass of its own, reported like the others (it extends the job's lease).
    expect(result.passes).toBe(2);
    expect(new Set(progress.map((report) => report.pass))).toEqual(new Set([1, 2]));
    expect(progress.every((report) => report.passCount === 2)).toBe(true);
    expect(result).toMatchObject({ format: 'opus', extension: 'ogg' });
    expect(result.keptInput).toBeUndefined();
    const { bitrate, channels } = AUDIO_AUTO_ENCODINGS.speech;
    expect(option(encode, '-application')).toBe('voip');
    expect(option(encode, '-b:a')).toBe(`${bitrate}k`);
    expect(option(encode, '-ac')).toBe(String(channels));
    const probe = await runner.probeAudio(outputPath);
    expect(probe).toMatchObject({ codec: 'opus', formatName: 'ogg', channels });
    const kbps = (result.outputSize * 8) / probe.durationSec / 1000;
    expect(Math.abs(kbps - bitrate) / bitrate).toBeLessThan(0.25);
    // auto chooses an encoding, it does not touch the level.
    const levelIn = await integratedLoudness(clips.podcast!);
    expect(Math.abs((await integratedLoudness(outputPath)) - levelIn)).toBeLessThan(1);
  });

  it('encodes stereo music as stereo audio Opus at the music bitrate', async () => {
    const { result, outputPath, encode } = await runAuto(clips.chords!, 'auto-music');
    const { bitrate, channels } = AUDIO_AUTO_ENCODINGS.musicStereo;
    expect(result.auto).toMatchObject({ class: 'music', application: 'audio', bitrate, channels });
    expect(option(encode, '-application')).toBe('audio');
    expect(option(encode, '-b:a')).toBe(`${bitrate}k`);
    expect(option(encode, '-ac')).toBe('2');
    const probe = await runner.probeAudio(outputPath);
    expect(probe).toMatchObject({ codec: 'opus', channels: 2 });
    const kbps = (result.outputSize * 8) / probe.durationSec / 1000;
    expect(Math.abs(kbps - bitrate) / bitrate).toBeLessThan(0.25);
  });

  it('encodes mono music mono, in the audio mode', async () => {
    const { result, encode } = await runAuto(clips.staccato!, 'auto-mono-music');
    expect(result.auto).toMatchObject({
      class: 'music',
      application: 'audio',
      ...AUDIO_AUTO_ENCODINGS.musicMono,
    });
    expect(option(encode, '-application')).toBe('audio');
    expect(option(encode, '-ac')).toBe('1');
  });
});

describe('never larger than the input', () => {
  it.each([
    ['as MP3 at 128 kbit/s', [op.encode('mp3', 128, 1)], undefined],
    // What auto heard is reported even when the input is the answer.
    ['with auto', [AUTO], 'speech'],
  ])(
    'a tiny MP3 re-encoded %s comes back as the input itself',
    async (_name, operations, heard) => {
      const { result, outputPath } = await runAuto(tinyMp3, 'kept', operations);
      expect(result.keptInput).toBe(true);
      expect(result).toMatchObject({ format: 'mp3', extension: 'mp3' });
      expect(result.outputSize).toBe(result.inputSize);
      expect((await readFile(outputPath)).equals(await readFile(tinyMp3))).toBe(true);
      expect(result.auto?.class).toBe(heard);
    },
  );

  it.each([
    ['in another format (Opus asked for)', () => tinyMp3, [op.encode('opus', 64, 1)]],
    ['with other channels than asked for', () => tinyMp3, [op.encode('mp3', 128, 2)]],
    ['after processing', () => tinyMp3, [op.normalize(-16), AUTO]],
    ['with tags the pipeline drops', () => taggedMp3, [op.encode('mp3', 128, 1)]],
  ])('is not kept %s, even when larger', async (_name, input, operations) => {
    const { result } = await runAuto(input(), 'not-kept', operations);
    expect(result.keptInput).toBeUndefined();
    expect(result.outputSize).toBeGreaterThan(result.inputSize);
  });
});
