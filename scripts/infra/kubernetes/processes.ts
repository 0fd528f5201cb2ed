import { readFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';

/** True while a process with this id exists (another user's too) and is not a zombie. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it exists, and belongs to another user.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    // A zombie still answers signal 0; its state letter in /proc says it is gone.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * True when the process's command line mentions `marker` (its data folder): the check that a
 * recorded pid still belongs to us and was not reused by someone else's process.
 */
export function commandLineMentions(pid: number, marker: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(marker);
  } catch {
    return false;
  }
}

/**
 * Stops a process that is not our child (one recorded by an earlier launcher run): SIGTERM,
 * then SIGKILL after `graceMs`, polling until it is gone. Only pids whose command line
 * mentions `marker` are touched.
 */
export async function stopRecordedProcess(
  pid: number,
  marker: string,
  graceMs = 10_000,
): Promise<void> {
  if (!isAlive(pid) || !commandLineMentions(pid, marker)) return;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (isAlive(pid) && Date.now() < deadline) await sleep(100);
  if (isAlive(pid)) {
    process.kill(pid, 'SIGKILL');
    const killDeadline = Date.now() + 5_000;
    while (isAlive(pid) && Date.now() < killDeadline) await sleep(50);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` every `intervalMs` until it returns a value, or throws after `timeoutMs`. */
export async function pollUntil<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  intervalMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    await sleep(intervalMs);
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`,
  );
}

/** Writes a launcher's state (its pids) under a temporary name and renames it into place. */
export async function writeStateFile(path: string, state: unknown): Promise<void> {
  await writeFile(`${path}.${process.pid}.tmp`, JSON.stringify(state, null, 2));
  await rename(`${path}.${process.pid}.tmp`, path);
}

/** The action runs on the first call; every call returns its one promise (idempotent stops). */
export function once(action: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => {
    running ??= action();
    return running;
  };
}
