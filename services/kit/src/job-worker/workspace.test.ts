import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { removeAbandonedWorkspaces, withJobWorkspace } from './workspace';

const roots: string[] = [];
async function tempRoot(): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'tamp-workspace-'));
  roots.push(root);
  return root;
}
afterEach(async () => {
  await Promise.all(roots.splice(0).map((root) => rm(root, { recursive: true, force: true })));
});

/** The pid of a process that has ended. */
function endedPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

async function folderWithInput(root: string, name: string): Promise<void> {
  await mkdir(join(root, name, 'job-job_x-abc'), { recursive: true });
  await writeFile(join(root, name, 'job-job_x-abc', 'input'), 'bytes');
}

describe('job workspaces', () => {
  it('removes what ended processes and an earlier life of this pid left, and nothing else', async () => {
    const root = await tempRoot();
    const ended = endedPid();
    await folderWithInput(root, `tamp-jobs-${ended}`);
    await folderWithInput(root, `tamp-jobs-${process.pid}`);
    await folderWithInput(root, `tamp-jobs-${process.ppid}`);
    await folderWithInput(root, 'someone-elses');
    expect(await removeAbandonedWorkspaces(root)).toBe(2);
    expect((await readdir(root)).sort()).toEqual(
      [`tamp-jobs-${process.ppid}`, 'someone-elses'].sort(),
    );
  });

  it('cleans a root once per process, before the first job, and removes each job folder after', async () => {
    const root = await tempRoot();
    await folderWithInput(root, `tamp-jobs-${endedPid()}`);
    const seen = await withJobWorkspace(root, 'job_1', async (workspace) => {
      await writeFile(join(await workspace(), 'input'), 'bytes');
      return readdir(root);
    });
    expect(seen).toEqual([`tamp-jobs-${process.pid}`]);
    expect(await readdir(join(root, `tamp-jobs-${process.pid}`))).toEqual([]);
    // A later leftover of another process is not looked for again while this one runs.
    await folderWithInput(root, `tamp-jobs-${endedPid()}`);
    await withJobWorkspace(root, 'job_2', async () => undefined);
    expect(await readdir(root)).toHaveLength(2);
  });

  it('makes a folder only for a job that asks, the same one however often it asks', async () => {
    const root = await tempRoot();
    const own = join(root, `tamp-jobs-${process.pid}`);
    await withJobWorkspace(root, 'job_quiet', async () => 'answered from memory');
    expect(await readdir(root)).toEqual([]);
    const [first, second, inside] = await withJobWorkspace(root, 'job_files', async (workspace) => {
      const folders = await Promise.all([workspace(), workspace()]);
      return [...folders, await readdir(own)] as const;
    });
    expect(first).toBe(second);
    expect(inside).toHaveLength(1);
    expect(await readdir(own)).toEqual([]);
  });
});
