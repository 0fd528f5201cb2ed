import { appendFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PodLogKeeper } from './pod-log-keeper';

describe('PodLogKeeper', () => {
  let dir: string;
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  it('finds the lines of a pod whose logs the kubelet deleted, and what was written after the keep, in time order', async () => {
    dir = await mkdtemp(join(tmpdir(), 'pod-log-keeper-'));
    const podLogs = join(dir, 'pod-logs');
    const oldPod = join(podLogs, 'tamp_tamp-job-1_uid1', 'job');
    const newPod = join(podLogs, 'tamp_tamp-job-2_uid2', 'job');
    await mkdir(oldPod, { recursive: true });
    await mkdir(newPod, { recursive: true });
    await writeFile(join(oldPod, '0.log'), '2026-11-27T10:00:01Z stdout F job_a started\n');
    await writeFile(join(newPod, '0.log'), '2026-11-27T10:00:03Z stdout F job_a completed\n');
    const keeper = new PodLogKeeper([podLogs], join(dir, 'kept'));
    await keeper.linesMentioning('nothing');
    await appendFile(join(oldPod, '0.log'), '2026-11-27T10:00:02Z stdout F job_a handed back\n');
    await rm(join(podLogs, 'tamp_tamp-job-1_uid1'), { recursive: true });

    expect(await keeper.linesMentioning('job_a')).toEqual([
      'tamp_tamp-job-1_uid1/job 2026-11-27T10:00:01Z stdout F job_a started',
      'tamp_tamp-job-1_uid1/job 2026-11-27T10:00:02Z stdout F job_a handed back',
      'tamp_tamp-job-2_uid2/job 2026-11-27T10:00:03Z stdout F job_a completed',
    ]);
  });
});
