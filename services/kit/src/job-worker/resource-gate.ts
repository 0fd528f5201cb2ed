import { readFileSync } from 'node:fs';

/**
 * Whether the machine (or the container's cgroup) can carry one more job right now, judged by
 * what the kernel reports rather than by a count alone:
 * - CPU: pressure stall information (`/proc/pressure/cpu`, "some avg10"): the share of the last
 *   10 s in which runnable tasks waited for a CPU. Past `cpuPressureLimit` every core is busy
 *   and another job would only slow the running ones down.
 * - memory: the cgroup's usage against its limit (v2 `memory.current`/`memory.max`, v1
 *   `memory.usage_in_bytes`/`memory.limit_in_bytes`), else the host's MemAvailable.
 * A worker always admits a job when it runs none, so a backlog makes progress on any machine;
 * what it does not admit waits in JetStream, where it costs nothing and cannot fail.
 * A source the kernel does not offer is skipped (e.g. no PSI on older kernels).
 */
export interface ResourceGate {
  /** Null when another job fits; otherwise why not (`cpu`, `memory`, or a gate's own reason). */
  blockedBy(): string | null;
}

export interface ResourceGateOptions {
  /** CPU pressure ("some avg10", percent) above which no further job starts. */
  cpuPressureLimit?: number;
  /** Memory in use (fraction of the limit) above which no further job starts. */
  memoryUseLimit?: number;
  /** For tests: where /proc and /sys are. */
  root?: string;
}

/**
 * The limits of every worker (docs/load-and-faults.md, "Admission by CPU and memory"): design
 * constants, not settings; a pipeline with its own measure of room adds its own gate (the image
 * worker's memory budget). Tests pass other limits and a fake /proc.
 */
const HOST_LIMITS = { root: '', cpuPressureLimit: 80, memoryUseLimit: 0.85 };

export function hostResourceGate(options: ResourceGateOptions = {}): ResourceGate {
  const {
    root,
    cpuPressureLimit: cpuLimit,
    memoryUseLimit: memoryLimit,
  } = {
    ...HOST_LIMITS,
    ...options,
  };
  return {
    blockedBy() {
      const pressure = cpuPressure(root);
      if (pressure !== null && pressure > cpuLimit) return 'cpu';
      const memory = memoryInUse(root);
      if (memory !== null && memory > memoryLimit) return 'memory';
      return null;
    },
  };
}

function read(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/** "some avg10" of /proc/pressure/cpu, in percent. */
export function cpuPressure(root = ''): number | null {
  const match = /^some avg10=([\d.]+)/m.exec(read(`${root}/proc/pressure/cpu`) ?? '');
  return match === null ? null : Number(match[1]);
}

/** Memory in use as a fraction of what this process may use. */
export function memoryInUse(root = ''): number | null {
  const cgroup = cgroupMemory(root);
  if (cgroup !== null) return cgroup;
  const meminfo = read(`${root}/proc/meminfo`);
  if (meminfo === null) return null;
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(meminfo)?.[1]);
  const total = field('MemTotal');
  const available = field('MemAvailable');
  return Number.isFinite(total) && Number.isFinite(available) && total > 0
    ? 1 - available / total
    : null;
}

/** Usage against limit of this process's own memory cgroup, when it has a limit. */
function cgroupMemory(root: string): number | null {
  const membership = read(`${root}/proc/self/cgroup`) ?? '';
  const v2 = /^0::(.*)$/m.exec(membership)?.[1];
  const v1 = /^\d+:memory:(.*)$/m.exec(membership)?.[1];
  const candidates: [string, string][] = [];
  if (v1 !== undefined) {
    for (const base of [`${root}/sys/fs/cgroup/memory${v1}`, `${root}/sys/fs/cgroup/memory`]) {
      candidates.push([`${base}/memory.usage_in_bytes`, `${base}/memory.limit_in_bytes`]);
    }
  }
  if (v2 !== undefined) {
    for (const base of [`${root}/sys/fs/cgroup${v2}`, `${root}/sys/fs/cgroup`]) {
      candidates.push([`${base}/memory.current`, `${base}/memory.max`]);
    }
  }
  for (const [usagePath, limitPath] of candidates) {
    const usage = Number(read(usagePath));
    const limit = Number(read(limitPath));
    // "max", or v1's "no limit" (a page-rounded 2^63), means unlimited: ask the host instead.
    if (Number.isFinite(usage) && Number.isFinite(limit) && limit > 0 && limit < 2 ** 60) {
      return usage / limit;
    }
  }
  return null;
}
