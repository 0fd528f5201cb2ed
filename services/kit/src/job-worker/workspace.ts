import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A process's job folders live in one folder of its own, `tamp-jobs-<pid>` under the worker's
 * temp root, so what a killed worker left behind can be told from what a live one is using
 * (several workers share the root under `npm start`; in a pod it is the pod's emptyDir, which
 * outlives a restarted container). A pid names a process only within its pid namespace, so a
 * root must not be shared by workers in different ones (two pods on one hostPath): each would
 * take the other's folders for a dead process's.
 */
const OWN_ROOT = /^tamp-jobs-(\d+)$/;

function ownRoot(tempRoot: string, pid: number = process.pid): string {
  return join(tempRoot, `tamp-jobs-${pid}`);
}

const claimedRoots = new Map<string, Promise<number>>();

/**
 * Removes the job folders of processes that no longer run, and this process's own from an
 * earlier life under the same pid (a container restarted in its pod): a killed worker never
 * reached its cleanup, and an input may be gigabytes. Once per process and root, before its
 * first job, as every worker of a process shares them. Resolves to the folders removed.
 */
export function removeAbandonedWorkspaces(tempRoot: string): Promise<number> {
  let claimed = claimedRoots.get(tempRoot);
  if (claimed === undefined) {
    claimed = removeFoldersOfDeadProcesses(tempRoot);
    claimedRoots.set(tempRoot, claimed);
  }
  return claimed;
}

async function removeFoldersOfDeadProcesses(tempRoot: string): Promise<number> {
  const entries = await readdir(tempRoot).catch(() => [] as string[]);
  const abandoned = entries.filter((entry) => {
    const pid = Number(OWN_ROOT.exec(entry)?.[1] ?? Number.NaN);
    return Number.isSafeInteger(pid) && (pid === process.pid || !isRunning(pid));
  });
  await Promise.all(
    abandoned.map((entry) => rm(join(tempRoot, entry), { recursive: true, force: true })),
  );
  return abandoned.length;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs `task` with a fresh private directory in this process's folder under `tempRoot` (named
 * after the job, so a leftover is easy to attribute), made when `task` first asks for it, and
 * removes it afterwards, whatever happened.
 */
export async function withJobWorkspace<T>(
  tempRoot: string,
  jobId: string,
  task: (workspace: () => Promise<string>) => Promise<T>,
): Promise<T> {
  await removeAbandonedWorkspaces(tempRoot);
  let made: Promise<string> | undefined;
  const workspace = () => {
    made ??= makeJobFolder(tempRoot, jobId);
    return made;
  };
  try {
    return await task(workspace);
  } finally {
    const workDir = await made?.catch(() => undefined);
    if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
  }
}

async function makeJobFolder(tempRoot: string, jobId: string): Promise<string> {
  const root = ownRoot(tempRoot);
  await mkdir(root, { recursive: true });
  const safeId = jobId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);
  return mkdtemp(join(root, `job-${safeId}-`));
}
