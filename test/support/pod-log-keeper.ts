import { link, mkdir, readdir, readFile, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';

/**
 * Keeps the container logs of pods that are deleted meanwhile (a rollout, a drain), so a test can
 * still tell what the replaced pods did with a job: every second, each log file under the
 * kubelets' pod log folders is hard-linked into `keepDir` (one link per inode, so rotated and
 * restarted containers' files are kept too). A link shares the inode, so what the container
 * writes after the link is kept as well, and the kubelet deleting its own name frees nothing.
 */
export class PodLogKeeper {
  private readonly kept = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;

  constructor(
    private readonly podLogDirs: readonly string[],
    private readonly keepDir: string,
  ) {}

  start(intervalMs = 1_000): void {
    this.timer ??= setInterval(() => {
      this.sweeping ??= this.keepNewFiles().finally(() => {
        this.sweeping = undefined;
      });
    }, intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.sweeping;
  }

  /** Every kept line that mentions `needle`, prefixed with its pod and container. */
  async linesMentioning(needle: string, limit = 200): Promise<string[]> {
    await this.keepNewFiles();
    const lines: string[] = [];
    for (const file of await filesUnder(this.keepDir)) {
      const where = relative(this.keepDir, file).split('/').slice(0, 2).join('/');
      for (const line of (await readFile(file, 'utf8')).split('\n')) {
        if (line.includes(needle)) lines.push(`${where} ${line}`);
      }
    }
    // CRI log lines start with their timestamp: sorted, they read as one timeline.
    return lines.sort((a, b) => timestampOf(a).localeCompare(timestampOf(b))).slice(-limit);
  }

  private async keepNewFiles(): Promise<void> {
    for (const dir of this.podLogDirs) {
      for (const file of await filesUnder(dir)) {
        const inode = await stat(file).then(
          (stats) => stats.ino,
          () => undefined,
        );
        if (inode === undefined) continue;
        const target = join(this.keepDir, `${relative(dir, file)}.${inode}`);
        if (this.kept.has(target)) continue;
        await mkdir(join(target, '..'), { recursive: true });
        // Gone between the listing and the link: nothing left to keep.
        await link(file, target).catch(() => undefined);
        this.kept.add(target);
      }
    }
  }
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

function timestampOf(line: string): string {
  return line.split(' ')[1] ?? '';
}
