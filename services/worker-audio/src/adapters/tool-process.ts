import { spawn } from 'node:child_process';
import { ProcessingAbortedError, ToolFailedError, ToolNotFoundError } from '../domain/errors';
import { BoundedTextTail } from './bounded-text-tail';

/** Lines longer than this are cut; ffmpeg's own lines are far shorter. */
const MAX_LINE_CHARS = 16 * 1024;

/** Splits a stream of text into lines without ever buffering more than one bounded line. */
class LineSplitter {
  private partial = '';
  constructor(private readonly onLine: (line: string) => void) {}

  push(text: string): void {
    const parts = (this.partial + text).split(/\r\n|\n|\r/);
    this.partial = (parts.pop() ?? '').slice(-MAX_LINE_CHARS);
    for (const line of parts) this.onLine(line.slice(0, MAX_LINE_CHARS));
  }

  end(): void {
    if (this.partial) this.onLine(this.partial);
    this.partial = '';
  }
}

export interface RunToolOptions {
  signal?: AbortSignal;
  onStdoutLine?: (line: string) => void;
  onStderrLine?: (line: string) => void;
  /** Characters of stderr (and of stdout) kept for errors and callers. Default 64 Ki. */
  tailChars?: number;
}

export interface ToolRunResult {
  /** Last `tailChars` of stdout. */
  stdout: string;
  stdoutTruncated: boolean;
  /** Last `tailChars` of stderr. */
  stderr: string;
}

const DEFAULT_TAIL_CHARS = 64 * 1024;

/**
 * Runs a command-line tool to completion. Output is streamed through bounded buffers and
 * optional line callbacks; an abort kills the process with SIGKILL because its output is
 * going to be thrown away anyway.
 */
export function runTool(
  executable: string,
  args: readonly string[],
  options: RunToolOptions = {},
): Promise<ToolRunResult> {
  const { signal } = options;
  const tailChars = options.tailChars ?? DEFAULT_TAIL_CHARS;
  if (signal?.aborted) return Promise.reject(new ProcessingAbortedError(executable));

  return new Promise((resolve, reject) => {
    const stdoutTail = new BoundedTextTail(tailChars);
    const stderrTail = new BoundedTextTail(tailChars);
    const stdoutLines = options.onStdoutLine ? new LineSplitter(options.onStdoutLine) : null;
    const stderrLines = options.onStderrLine ? new LineSplitter(options.onStderrLine) : null;
    let settled = false;
    let aborted = false;

    const child = spawn(executable, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      stdoutTail.append(chunk);
      stdoutLines?.push(chunk);
    });
    child.stderr.on('data', (chunk: string) => {
      stderrTail.append(chunk);
      stderrLines?.push(chunk);
    });

    const onAbort = () => {
      aborted = true;
      child.kill('SIGKILL');
    };
    signal?.addEventListener('abort', onAbort, { once: true });

    const finish = (error: Error | null) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      if (error) {
        reject(error);
        return;
      }
      resolve({
        stdout: stdoutTail.toString(),
        stdoutTruncated: stdoutTail.truncated,
        stderr: stderrTail.toString(),
      });
    };

    child.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT' || error.code === 'EACCES') {
        finish(new ToolNotFoundError(executable));
      } else {
        finish(error);
      }
    });
    // 'close' fires after stdio is drained, so every line has been delivered by then.
    child.on('close', (exitCode, exitSignal) => {
      stdoutLines?.end();
      stderrLines?.end();
      if (aborted) finish(new ProcessingAbortedError(executable));
      else if (exitCode === 0) finish(null);
      else finish(new ToolFailedError(executable, exitCode, exitSignal, stderrTail.toString()));
    });
  });
}
