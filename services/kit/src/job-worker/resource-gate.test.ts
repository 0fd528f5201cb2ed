import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cpuPressure, hostResourceGate, memoryInUse } from './resource-gate';

const roots: string[] = [];
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

/** A fake /proc and /sys with just the files given. */
async function machine(files: Record<string, string>): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'tamp-gate-'));
  roots.push(root);
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), content);
  }
  return root;
}

const PRESSURE = (some: number) =>
  `some avg10=${some.toFixed(2)} avg60=1.00 avg300=1.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n`;
const MEMINFO =
  'MemTotal:       1000000 kB\nMemFree:         100000 kB\nMemAvailable:    600000 kB\n';

describe('hostResourceGate', () => {
  it('blocks on CPU pressure above the limit, and admits below it', async () => {
    const busy = await machine({ '/proc/pressure/cpu': PRESSURE(95), '/proc/meminfo': MEMINFO });
    expect(cpuPressure(busy)).toBe(95);
    expect(hostResourceGate({ root: busy }).blockedBy()).toBe('cpu');
    expect(hostResourceGate({ root: busy, cpuPressureLimit: 99 }).blockedBy()).toBeNull();
  });

  it("reads the memory cgroup's usage against its limit (v1), else the host's MemAvailable", async () => {
    const limited = await machine({
      '/proc/self/cgroup': '4:memory:/pod\n0::/\n',
      '/sys/fs/cgroup/memory/pod/memory.usage_in_bytes': '900',
      '/sys/fs/cgroup/memory/pod/memory.limit_in_bytes': '1000',
      '/proc/meminfo': MEMINFO,
    });
    expect(memoryInUse(limited)).toBe(0.9);
    expect(hostResourceGate({ root: limited }).blockedBy()).toBe('memory');
  });

  it('treats an unlimited cgroup (v2 "max") as the host, and missing sources as no limit', async () => {
    const host = await machine({
      '/proc/self/cgroup': '0::/\n',
      '/sys/fs/cgroup/memory.current': '900',
      '/sys/fs/cgroup/memory.max': 'max\n',
      '/proc/meminfo': MEMINFO,
    });
    expect(memoryInUse(host)).toBeCloseTo(0.4);
    expect(hostResourceGate({ root: host }).blockedBy()).toBeNull();
    const bare = await machine({});
    expect(hostResourceGate({ root: bare }).blockedBy()).toBeNull();
  });
});
