import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Runs `task` with a fresh private directory under `tempRoot` (named after the job, so a
 * leftover is easy to attribute) and removes it afterwards, whatever happened.
 */
export async function withJobWorkspace<T>(
  tempRoot: string,
  jobId: string,
  task: (workDir: string) => Promise<T>,
): Promise<T> {
  await mkdir(tempRoot, { recursive: true });
  const safeId = jobId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);
  const workDir = await mkdtemp(join(tempRoot, `job-${safeId}-`));
  try {
    return await task(workDir);
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}
