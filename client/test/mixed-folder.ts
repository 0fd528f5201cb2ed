import { execFile as execFileCallback } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { creditCost, type Pipeline } from '@tamp/proto';
import { toolPath } from '../../scripts/infra/provision';
import { buildPdf } from '../../services/worker-text/test/support/pdf-fixture';
import { photo, speechWav } from '../../test/support/media';

const execFile = promisify(execFileCallback);

export interface MixedFile {
  path: string;
  pipeline: Pipeline;
  bytes: number;
}

const KINDS = ['jpg', 'wav', 'txt', 'png', 'mp3', 'pdf', 'jpg', 'webp', 'txt', 'wav'] as const;

/**
 * `count` distinct files of every accepted kind (photos, speech, text, PDF), made at run time:
 * no binary fixtures in the repository. Every fifth file goes into a subfolder.
 */
export async function writeMixedFolder(folder: string, count: number): Promise<MixedFile[]> {
  const files: MixedFile[] = [];
  for (let index = 0; index < count; index++) {
    const kind = KINDS[index % KINDS.length]!;
    const directory = index % 5 === 4 ? join(folder, 'more') : folder;
    await mkdir(directory, { recursive: true });
    const path = join(directory, `file-${String(index).padStart(2, '0')}.${kind}`);
    const bytes = await contentOf(kind, index);
    await writeFile(path, bytes);
    files.push({ path, pipeline: pipelineOf(kind), bytes: bytes.byteLength });
  }
  return files;
}

/** Credits the files cost, one job each (proto's rule). */
export function creditsFor(files: readonly MixedFile[]): number {
  return files.reduce((sum, file) => sum + creditCost(file.pipeline, file.bytes), 0);
}

function pipelineOf(kind: (typeof KINDS)[number]): Pipeline {
  if (kind === 'wav' || kind === 'mp3') return 'audio';
  if (kind === 'txt' || kind === 'pdf') return 'text';
  return 'image';
}

async function contentOf(kind: (typeof KINDS)[number], index: number): Promise<Buffer> {
  const sentence = `File number ${index} says hello to the Tamp command line.`;
  switch (kind) {
    case 'jpg':
      return photo(1200 + index * 8, 900, 'jpeg');
    case 'png':
      return photo(640 + index * 4, 480, 'png');
    case 'webp':
      return photo(800 + index * 4, 600, 'webp');
    case 'wav':
      return speechWav(sentence);
    case 'mp3':
      return mp3Of(await speechWav(sentence));
    case 'txt':
      return Buffer.from(`${sentence}   Some    spaced     text.\n\n\n\n`.repeat(40 + index));
    case 'pdf':
      return buildPdf([[sentence, 'A second line of   text.'], ['Page two.']]);
  }
}

async function mp3Of(wav: Buffer): Promise<Buffer> {
  const ffmpeg = existsSync(toolPath('ffmpeg')) ? toolPath('ffmpeg') : 'ffmpeg';
  const folder = await mkdtemp(join(tmpdir(), 'tamp-mp3-'));
  const input = join(folder, 'in.wav');
  await writeFile(input, wav);
  const output = join(folder, 'out.mp3');
  await execFile(ffmpeg, ['-v', 'error', '-y', '-i', input, '-b:a', '64k', output]);
  const bytes = await readFile(output);
  await rm(folder, { recursive: true, force: true });
  return bytes;
}
