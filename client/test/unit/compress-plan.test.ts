import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDelivery } from '../../src/cli/commands';
import { parseChoices, planFiles, withOutputOf } from '../../src/cli/compress/plan';
import { StateFile, stateKey } from '../../src/cli/compress/state';
import { UsageError } from '../../src/cli/failures';
import { ValidationError } from '../../src/errors';

let folder: string;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), 'tamp-plan-'));
  await mkdir(join(folder, 'media', 'deep'), { recursive: true });
  for (const name of ['a.jpg', 'a.png', 'b.wav', 'notes.txt', 'deep/c.mp3', 'skip.gif']) {
    await writeFile(join(folder, 'media', name), name);
  }
});

afterAll(() => rm(folder, { recursive: true, force: true }));

const plan = (inputs: string[], presets: string[] = [], ops?: string) =>
  planFiles(inputs, { out: 'out', cwd: folder, choices: parseChoices(presets, ops) });

describe('planning a compress run', () => {
  it('walks folders, keeps their layout under --out, names outputs by what the chain makes', async () => {
    const { files, ignored } = await plan(['media'], ['audio=podcast']);
    const outputs = Object.fromEntries(
      files.map((file) => [file.display, file.output.slice(folder.length + 1)]),
    );
    expect(outputs).toEqual({
      // photo a.jpg and a.png would both be a.webp: they keep their own extension.
      'media/a.jpg': 'out/a.jpg.webp',
      'media/a.png': 'out/a.png.webp',
      'media/b.wav': 'out/b.ogg',
      'media/deep/c.mp3': 'out/deep/c.ogg',
      'media/notes.txt': 'out/notes.txt',
    });
    expect(ignored.map((path) => path.slice(folder.length + 1))).toEqual(['media/skip.gif']);
    const audio = files.find((file) => file.pipeline === 'audio')!;
    expect(audio.choice.body).toEqual({ preset: 'podcast' });
    const image = files.find((file) => file.pipeline === 'image')!;
    expect(image.choice.body).toEqual({ preset: 'medium' });
  });

  it('globs are laid out from their fixed part; files go to the top', async () => {
    const globbed = await plan(['media/**/*.mp3']);
    expect(globbed.files.map((file) => file.output.slice(folder.length + 1))).toEqual([
      'out/deep/c.ogg',
    ]);
    const named = await plan(['media/deep/c.mp3']);
    expect(named.files[0]!.output.slice(folder.length + 1)).toBe('out/c.ogg');
  });

  it('an operations chain decides the output type; a bad one is refused before any request', async () => {
    const avif = '{"image":[{"type":"encode","params":{"format":"avif"}}]}';
    const { files } = await plan(['media/a.jpg'], [], avif);
    expect(files[0]!.output.endsWith('a.avif')).toBe(true);
    await expect(plan(['media/a.jpg'], ['bogus'])).rejects.toBeInstanceOf(ValidationError);
    await expect(
      plan(['media/a.jpg'], [], '[{"type":"encode","params":{"quality":0}}]'),
    ).rejects.toBeInstanceOf(ValidationError);
    await expect(plan(['media/skip.gif'])).rejects.toBeInstanceOf(UsageError);
    await expect(plan(['missing'])).rejects.toBeInstanceOf(UsageError);
    expect(() => parseChoices(['medium', 'chill'], undefined)).toThrow(UsageError);
    expect(() => parseChoices(['video=medium'], undefined)).toThrow(UsageError);
  });
});

describe('a format the job chooses', () => {
  it('is planned without an extension and named after the result', async () => {
    const auto = '{"image":[{"type":"encode","params":{"format":"auto"}}]}';
    const { files } = await plan(['media/a.jpg', 'media/a.png', 'media/b.wav'], [], auto);
    const [jpeg, png, wav] = files;
    expect(jpeg!.output.slice(folder.length + 1)).toBe('out/a.jpg.auto');
    expect(png!.output.slice(folder.length + 1)).toBe('out/a.png.auto');
    const url = 'http://127.0.0.1:9000/tamp/outputs/job_1/result.avif?X-Amz-Signature=f00';
    expect(withOutputOf(jpeg!, url).output.slice(folder.length + 1)).toBe('out/a.jpg.avif');
    expect(withOutputOf(png!, '/elsewhere/a.png.webp').output).toMatch(/out\/a\.png\.webp$/);
    // A chain whose format is known keeps the name it was planned with.
    expect(withOutputOf(wav!, url)).toBe(wav);
  });
});

describe('the state file', () => {
  it('one run at a time per output folder; a dead holder does not block', async () => {
    const out = join(folder, 'state');
    const state = await StateFile.open(out);
    await expect(StateFile.open(out)).rejects.toBeInstanceOf(UsageError);
    const key = stateKey('hash', 'image', [{ type: 'encode' }]);
    await state.update(key, {
      status: 'created',
      source: 'a.jpg',
      output: 'a.webp',
      pipeline: 'image',
      inputSize: 1,
      baseUrl: 'http://x',
      jobId: 'job_1',
    });
    await state.close();
    await writeFile(join(out, '.tamp-state.lock'), '999999999');
    const reopened = await StateFile.open(out);
    expect(reopened.get(key)).toMatchObject({ status: 'created', jobId: 'job_1' });
    await reopened.close();
    const saved = JSON.parse(await readFile(join(out, '.tamp-state.json'), 'utf8'));
    expect(Object.keys(saved.files)).toEqual([key]);
  });

  it('keys depend on the content and on the resolved chain', () => {
    const chain = [{ type: 'encode', params: { quality: 80 } }];
    expect(stateKey('a', 'image', chain)).toBe(stateKey('a', 'image', structuredClone(chain)));
    expect(stateKey('a', 'image', chain)).not.toBe(stateKey('b', 'image', chain));
    expect(stateKey('a', 'image', chain)).not.toBe(
      stateKey('a', 'image', [{ type: 'encode', params: { quality: 81 } }]),
    );
  });
});

describe('saved webhook deliveries', () => {
  it('reads a raw HTTP request and the JSON form', () => {
    const raw = Buffer.from(
      'POST /hook HTTP/1.1\r\nWebhook-Id: msg_1\r\nX-A: b:c\r\n\r\n{"x":1}\r\n',
    );
    expect(parseDelivery(raw)).toEqual({
      headers: { 'webhook-id': 'msg_1', 'x-a': 'b:c' },
      body: new Uint8Array(Buffer.from('{"x":1}\r\n')),
    });
    const json = Buffer.from(JSON.stringify({ headers: { 'webhook-id': 'm' }, body: '{"y":2}' }));
    expect(parseDelivery(json).body).toEqual(new TextEncoder().encode('{"y":2}'));
    expect(() => parseDelivery(Buffer.from('no blank line'))).toThrow(UsageError);
  });
});
