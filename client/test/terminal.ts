import { execFile as execFileCallback } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { toolCommand } from '@tamp/scripts/infra/provision';

const execFile = promisify(execFileCallback);

/**
 * A real terminal: a detached tmux session on a private socket, read with capture-pane as a
 * person would see it. tmux is Debian's, provisioned into .tools/bin (scripts/infra/tools.json).
 */
export class TmuxTerminal {
  private constructor(
    private readonly tmux: string,
    private readonly socket: string,
  ) {}

  static async start(options: {
    folder: string;
    command: string;
    env: Record<string, string>;
    width: number;
    height: number;
  }): Promise<TmuxTerminal> {
    const tmux = toolCommand('tmux');
    const terminal = new TmuxTerminal(tmux, join(options.folder, 'tmux.sock'));
    const environment = Object.entries(options.env).flatMap(([name, value]) => [
      '-e',
      `${name}=${value}`,
    ]);
    await terminal.run([
      'new-session',
      '-d',
      '-x',
      String(options.width),
      '-y',
      String(options.height),
      ...environment,
      options.command,
    ]);
    return terminal;
  }

  /** The screen as text, trailing blank lines dropped. */
  async screen(): Promise<string> {
    const { stdout } = await this.run(['capture-pane', '-p']);
    return stdout.replace(/\n+$/, '');
  }

  /** Ends the session and its tmux server (both started here). */
  async stop(): Promise<void> {
    await this.run(['kill-server']).catch(() => {});
  }

  private run(args: string[]) {
    return execFile(this.tmux, ['-S', this.socket, '-f', '/dev/null', ...args], {
      env: { ...process.env, TMUX: '' },
    });
  }
}
