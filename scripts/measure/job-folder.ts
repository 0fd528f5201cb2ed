/**
 * What a job's private folder costs: `withJobWorkspace` for jobs that ask for their folder (a
 * mkdir of the process's root, a mkdtemp, a recursive rm afterwards) against jobs that never
 * ask, CPU of this process (libuv's threads included) and wall time per job. Why the kit makes
 * the folder only on a job's first call to `workspace()` (docs/performance.md).
 *
 *   node --import tsx scripts/measure/job-folder.ts [--jobs 5000] [--rounds 3]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { withJobWorkspace } from '../../services/kit/src/job-worker/workspace';
import { table } from '../load/report';

async function timeJobs(root: string, jobs: number, ask: boolean) {
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let job = 0; job < jobs; job++) {
    await withJobWorkspace(root, `job_${job}`, async (workspace) => (ask ? workspace() : null));
  }
  const used = process.cpuUsage(cpu);
  return {
    cpuMs: (used.user + used.system) / 1000 / jobs,
    wallMs: (performance.now() - started) / jobs,
  };
}

const { values } = parseArgs({
  options: { jobs: { type: 'string', default: '5000' }, rounds: { type: 'string', default: '3' } },
});
const root = await mkdtemp(join(tmpdir(), 'tamp-job-folder-'));
try {
  const rows = [];
  for (let round = 1; round <= Number(values.rounds); round++) {
    const folder = await timeJobs(root, Number(values.jobs), true);
    const none = await timeJobs(root, Number(values.jobs), false);
    rows.push({
      round,
      'folder: CPU ms/job': folder.cpuMs.toFixed(3),
      'folder: wall ms/job': folder.wallMs.toFixed(3),
      'none: CPU ms/job': none.cpuMs.toFixed(3),
      'none: wall ms/job': none.wallMs.toFixed(3),
    });
  }
  console.log(`${values.jobs} jobs per cell (${process.version})`);
  console.log(table(rows));
} finally {
  await rm(root, { recursive: true, force: true });
}
