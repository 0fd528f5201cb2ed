import { readFileSync } from 'node:fs';
import { chmod, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { toolCommand } from '@tamp/scripts/infra/provision';
import { runTool } from '../../src/adapters/tool-process';

/**
 * CPU accounting for audio jobs, as Linux accounts it: a job's cost is the worker's own CPU
 * plus that of every ffmpeg/ffprobe it started and reaped. Used by the job-cost test, which
 * pins the per-job cost against one plain ffmpeg command with the same filters.
 */

/** USER_HZ: /proc reports times in ticks of 1/100 s on every Linux architecture. */
const MS_PER_TICK = 10;

/** CPU ms of the children this process has reaped (cutime + cstime). */
export function reapedChildrenCpuMs(): number {
  // Fields after the command name (which may hold spaces) start after ')'.
  const fields = readFileSync('/proc/self/stat', 'utf8').split(')')[1]!.trim().split(' ');
  return (Number(fields[13]) + Number(fields[14])) * MS_PER_TICK;
}

/** CPU ms of this process (all its threads), microsecond resolution. */
export function ownCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

export interface CpuCost {
  /** The calling process (the worker's code). */
  ownMs: number;
  /** Processes it started (ffmpeg, ffprobe), counted when reaped. */
  childrenMs: number;
  totalMs: number;
}

/**
 * Mean CPU per call of `work` over `repetitions` calls. Children are accounted in 10 ms ticks,
 * so the mean over several calls is what has the resolution, not one call.
 */
export async function meanCpuCost(
  work: () => Promise<unknown>,
  repetitions: number,
): Promise<CpuCost> {
  const ownBefore = ownCpuMs();
  const childrenBefore = reapedChildrenCpuMs();
  for (let run = 0; run < repetitions; run++) await work();
  const ownMs = (ownCpuMs() - ownBefore) / repetitions;
  const childrenMs = (reapedChildrenCpuMs() - childrenBefore) / repetitions;
  return { ownMs, childrenMs, totalMs: ownMs + childrenMs };
}

/** Mean CPU ms of one run of a command (its process only), over `repetitions` runs. */
export async function commandCpuMs(
  executable: string,
  args: readonly string[],
  repetitions: number,
): Promise<number> {
  const cost = await meanCpuCost(() => runTool(executable, args), repetitions);
  return cost.childrenMs;
}

export interface ToolRun {
  tool: 'ffmpeg' | 'ffprobe';
  /** As `/usr/bin/time %C` prints them: space-joined. */
  commandLine: string;
  cpuMs: number;
}

export interface TimedTools {
  ffmpegPath: string;
  ffprobePath: string;
  /** The runs recorded since the last call, in start order, and forgets them. */
  takeRuns(): Promise<ToolRun[]>;
}

/**
 * ffmpeg and ffprobe behind `/usr/bin/time`, so every run the worker starts is recorded with
 * its arguments and its own CPU time (user + system; 10 ms resolution). For the breakdown per
 * process; totals come from `meanCpuCost` without the wrappers.
 */
export async function timedTools(dir: string): Promise<TimedTools> {
  const log = join(dir, 'tool-runs.log');
  const wrapper = async (tool: ToolRun['tool'], real: string) => {
    const path = join(dir, `timed-${tool}`);
    // exec: the wrapper shell is replaced, and time reports the tool's own rusage only.
    await writeFile(
      path,
      `#!/bin/sh\nexec /usr/bin/time -a -o '${log}' -f '%U %S ${tool} %C' '${real}' "$@"\n`,
    );
    await chmod(path, 0o755);
    return path;
  };
  return {
    ffmpegPath: await wrapper('ffmpeg', toolCommand('ffmpeg')),
    ffprobePath: await wrapper('ffprobe', toolCommand('ffprobe')),
    async takeRuns() {
      const text = await readFile(log, 'utf8').catch(() => '');
      await rm(log, { force: true });
      return text.split('\n').flatMap((line): ToolRun[] => {
        const match = /^(\d+\.\d+) (\d+\.\d+) (ffmpeg|ffprobe) \S+ (.*)$/.exec(line);
        if (!match) return [];
        const [, user = '0', system = '0', tool, commandLine = ''] = match;
        return [
          {
            tool: tool as ToolRun['tool'],
            commandLine,
            cpuMs: (Number(user) + Number(system)) * 1000,
          },
        ];
      });
    },
  };
}
