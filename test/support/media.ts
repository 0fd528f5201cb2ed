import { execFile as execFileCallback } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { ImageFixtures } from '../../services/worker-image/test/support/fixtures';

const execFile = promisify(execFileCallback);

/** Real media made at test time: no binary fixtures in the repository. */
export async function photo(
  width: number,
  height: number,
  format: 'jpeg' | 'png' | 'webp' = 'jpeg',
): Promise<Buffer> {
  const fixtures = await ImageFixtures.create();
  return readFile(await fixtures.photo({ width, height, format }));
}

export async function tinyPng(): Promise<Buffer> {
  return sharp({ create: { width: 32, height: 24, channels: 3, background: '#3366cc' } })
    .png()
    .toBuffer();
}

/** A short spoken WAV (espeak-ng), optionally with silence around it. */
export async function speechWav(text = 'Tamp compresses audio, images and text.'): Promise<Buffer> {
  const directory = await mkdtemp(join(tmpdir(), 'tamp-speech-'));
  const path = join(directory, 'speech.wav');
  await execFile(process.env.ESPEAK_PATH ?? 'espeak-ng', ['-w', path, text]);
  return readFile(path);
}
