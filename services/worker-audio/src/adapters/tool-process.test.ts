import { toolCommand } from '@tamp/scripts/infra/provision';
import { describe, expect, it } from 'vitest';
import { ProcessingAbortedError, ToolFailedError, ToolNotFoundError } from '../domain/errors';
import { runTool } from './tool-process';

const ffmpeg = toolCommand('ffmpeg');

describe('runTool', () => {
  it('reports a missing executable as ToolNotFoundError', async () => {
    await expect(runTool('/nonexistent/ffmpeg', ['-version'])).rejects.toBeInstanceOf(
      ToolNotFoundError,
    );
  });

  it('reports a failing run with its exit code and the end of stderr', async () => {
    const error = await runTool(ffmpeg, ['-hide_banner', '-i', 'file:/nonexistent.wav']).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ToolFailedError);
    expect((error as ToolFailedError).exitCode).not.toBe(0);
    expect((error as ToolFailedError).stderrTail).toMatch(/No such file or directory/);
    expect((error as ToolFailedError).message).toMatch(/No such file or directory/);
  });

  it('streams every stderr line but keeps only a bounded tail', async () => {
    let lines = 0;
    const result = await runTool(
      ffmpeg,
      // ebur128 logs one line per 100 ms of audio: ~600 lines, ~60 KB for a minute.
      [
        '-nostdin',
        '-hide_banner',
        '-f',
        'lavfi',
        '-i',
        'sine=d=60',
        '-af',
        'ebur128',
        '-f',
        'null',
        '-',
      ],
      { tailChars: 2000, onStderrLine: () => lines++ },
    );
    expect(lines).toBeGreaterThan(550);
    expect(result.stderr.length).toBeLessThanOrEqual(2000);
    expect(result.stderr).toMatch(/LRA high/);
  });

  it('kills the process when aborted', async () => {
    const controller = new AbortController();
    // An endless generator: without the kill this run never ends.
    const run = runTool(ffmpeg, ['-nostdin', '-f', 'lavfi', '-i', 'anoisesrc', '-f', 'null', '-'], {
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 300);
    await expect(run).rejects.toBeInstanceOf(ProcessingAbortedError);
  });

  it('does not start when the signal is already aborted', async () => {
    await expect(
      runTool('/nonexistent/tool', [], { signal: AbortSignal.abort() }),
    ).rejects.toBeInstanceOf(ProcessingAbortedError);
  });
});
