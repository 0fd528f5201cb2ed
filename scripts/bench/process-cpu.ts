import { readdirSync, readFileSync } from 'node:fs';
import type { BenchStack } from './bench-stack';

/**
 * CPU time per process as Linux accounts it in /proc, with everything each process started:
 * ffmpeg under the audio worker, PostgreSQL's backends under its postmaster. Children that
 * already exited count too, through their parent's reaped-children times (cutime/cstime), as
 * long as the parent waited for them (Node and the postmaster do).
 */

/** USER_HZ: /proc reports times in clock ticks of 1/100 s on every Linux architecture. */
const TICKS_PER_SECOND = 100;

interface ProcessTimes {
  ppid: number;
  /** utime + stime: the process's own CPU seconds, all its threads. */
  own: number;
  /** cutime + cstime: CPU seconds of children it has reaped. */
  reaped: number;
}

/** utime+stime and cutime+cstime of every process, read once. */
function processTimes(): Map<number, ProcessTimes> {
  const times = new Map<number, ProcessTimes>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Fields after the command name (which may hold spaces) start at ')'.
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(')')[1]!.trim().split(' ');
      times.set(Number(entry), {
        ppid: Number(fields[1]),
        own: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND,
        reaped: (Number(fields[13]) + Number(fields[14])) / TICKS_PER_SECOND,
      });
    } catch {
      // Gone meanwhile.
    }
  }
  return times;
}

/** A process to account for, by the name a report shows. */
export interface NamedProcess {
  name: string;
  pid: number | undefined;
}

/** CPU seconds used so far by each process and its descendants (0 for one not running). */
export function cpuSecondsOf(processes: readonly NamedProcess[]): Map<string, number> {
  const times = processTimes();
  const children = new Map<number, number[]>();
  for (const [pid, { ppid }] of times) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  const tree = (pid: number): number => {
    const own = times.get(pid);
    if (own === undefined) return 0;
    return (
      own.own + own.reaped + (children.get(pid) ?? []).reduce((sum, child) => sum + tree(child), 0)
    );
  };
  return new Map(
    processes.map(({ name, pid }) => [name, pid === undefined ? 0 : tree(pid)] as const),
  );
}

/** Every service and server process of a bench stack. */
export function stackProcesses(stack: BenchStack): NamedProcess[] {
  return [
    ...stack.services.services.map((service) => ({ name: service.name, pid: service.pid() })),
    ...Object.values(stack.infrastructure.servers).map((server) => ({
      name: server.name,
      pid: server.pid(),
    })),
  ];
}

/** CPU seconds used so far by each process of the stack, with everything it started. */
export function stackCpuSeconds(stack: BenchStack): Map<string, number> {
  return cpuSecondsOf(stackProcesses(stack));
}

/** CPU seconds each process used between two readings, most first. */
export function cpuUsedBetween(
  before: ReadonlyMap<string, number>,
  after: ReadonlyMap<string, number>,
): [name: string, seconds: number][] {
  return [...after]
    .map(([name, seconds]): [string, number] => [name, seconds - (before.get(name) ?? 0)])
    .sort((a, b) => b[1] - a[1]);
}

/** The process that used the most CPU between two readings, with its share of the total. */
export function busiest(
  before: ReadonlyMap<string, number>,
  after: ReadonlyMap<string, number>,
): string {
  const used = cpuUsedBetween(before, after);
  const total = used.reduce((sum, [, seconds]) => sum + seconds, 0);
  const [name, seconds] = used[0] ?? ['-', 0];
  return `${name} ${Math.round((seconds / Math.max(total, 0.001)) * 100)} %`;
}
