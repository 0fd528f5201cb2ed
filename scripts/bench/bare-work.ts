import { fork } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../infra/provision';
import type { JobKind } from '../load/workload';
import { imageWorkerAllocatorEnv } from '../stack/services';
import type { BareWorkReport, BareWorkTask } from './bare-work-process';

/**
 * The bare work of a kind of job: what the machine does when it runs only the worker's own code
 * for it (bare-work-process.ts), one process per core at once, so its rate is the machine's
 * and comparable with the whole stack's on the same cores.
 */

export interface BareRate {
  jobsPerSec: number;
  /** CPU of the bare processes (and their ffmpeg children) per job. */
  cpuMsPerJob: number;
}

const PROCESS_ENTRY = join(PROJECT_ROOT, 'scripts/bench/bare-work-process.ts');

/** Start-up and the untimed first job, on top of the timed loop, before a process is given up. */
const START_ALLOWANCE_MS = 120_000;

export async function measureBareWork(kind: JobKind, seconds: number): Promise<BareRate> {
  const scratch = await mkdtemp(join(tmpdir(), `tamp-bare-${kind.name}-`));
  try {
    // Named as the worker names its download (kit's processUploadedFile).
    const inputPath = join(scratch, 'input');
    await writeFile(inputPath, kind.input);
    const reports = await Promise.all(
      Array.from({ length: availableParallelism() }, (_, index) =>
        runBareProcess({
          pipeline: kind.pipeline,
          body: kind.body,
          inputPath,
          scratchDir: join(scratch, `process-${index}`),
          seconds,
        }),
      ),
    );
    const jobs = reports.reduce((sum, report) => sum + report.jobs, 0);
    const cpuSeconds = reports.reduce((sum, report) => sum + report.cpuSeconds, 0);
    return {
      // The processes ran side by side: their rates add up.
      jobsPerSec: reports.reduce((sum, report) => sum + report.jobs / report.elapsedSec, 0),
      cpuMsPerJob: (cpuSeconds * 1000) / Math.max(jobs, 1),
    };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

function runBareProcess(task: BareWorkTask): Promise<BareWorkReport> {
  const child = fork(PROCESS_ENTRY, [JSON.stringify(task)], {
    cwd: PROJECT_ROOT,
    execArgv: ['--import', 'tsx'],
    // The image worker runs on jemalloc; its bare work does too.
    env: { ...process.env, ...(task.pipeline === 'image' ? imageWorkerAllocatorEnv() : {}) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    let report: BareWorkReport | undefined;
    const timer = setTimeout(
      () => {
        child.kill('SIGKILL');
        reject(new Error(`bare ${task.pipeline} work did not finish in time`));
      },
      START_ALLOWANCE_MS + task.seconds * 1000,
    );
    child.once('message', (message) => {
      report = message as BareWorkReport;
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (report !== undefined) resolve(report);
      else
        reject(new Error(`bare ${task.pipeline} work exited (${signal ?? code}) without a report`));
    });
  });
}
