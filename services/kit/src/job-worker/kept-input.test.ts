import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keepInputWhenNotSmaller, keepsInput } from './kept-input';

describe('keepsInput', () => {
  const facts = {
    inputFormat: 'jpeg' as const,
    inputSize: 1_000,
    outputSize: 1_000,
    accepted: ['jpeg' as const],
    sameContent: true,
    inputNeedsRewrite: false,
  };

  it('keeps the input when nothing smaller was found in an accepted format', () => {
    expect(keepsInput(facts)).toBe(true);
    expect(keepsInput({ ...facts, outputSize: 1_001 })).toBe(true);
    expect(keepsInput({ ...facts, outputSize: 999 })).toBe(false);
  });

  it('not when its format, content or metadata is not what the job asks for', () => {
    expect(keepsInput({ ...facts, accepted: ['webp' as 'jpeg'] })).toBe(false);
    expect(keepsInput({ ...facts, inputFormat: null })).toBe(false);
    expect(keepsInput({ ...facts, sameContent: false })).toBe(false);
    expect(keepsInput({ ...facts, inputNeedsRewrite: true })).toBe(false);
  });
});

describe('keepInputWhenNotSmaller', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tamp-kept-input-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('copies the input over the output and says what the result became', async () => {
    const inputPath = join(dir, 'input');
    const outputPath = join(dir, 'output');
    await writeFile(inputPath, 'small');
    await writeFile(outputPath, 'the larger encoding');
    const paths = { inputPath, outputPath };
    const facts = {
      inputFormat: 'mp3' as const,
      inputSize: 5,
      outputSize: 19,
      accepted: ['mp3' as const],
      sameContent: true,
      inputNeedsRewrite: false,
    };

    expect(await keepInputWhenNotSmaller(paths, { ...facts, sameContent: false })).toBeNull();
    expect(await readFile(outputPath, 'utf8')).toBe('the larger encoding');

    expect(await keepInputWhenNotSmaller(paths, facts)).toEqual({
      format: 'mp3',
      outputSize: 5,
      keptInput: true,
    });
    expect(await readFile(outputPath, 'utf8')).toBe('small');
  });
});
