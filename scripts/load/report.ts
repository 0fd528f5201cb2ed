import type { Creation, FinishedJob } from './traffic';

/** The value below which `fraction` of `values` lie (nearest rank). */
export function percentile(values: readonly number[], fraction: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[rank]!;
}

export interface TrafficSummary {
  creations: number;
  accepted: number;
  /** Creations the client gave up on (still failing after every retry). */
  notAccepted: number;
  /** Answers the client retried or gave up on, by kind. */
  answers503: number;
  answers503WithoutRetryAfter: number;
  answers409: number;
  answers429: number;
  timeouts: number;
  networkErrors: number;
  /** Refused for a reason no retry fixes (a wrong request). */
  refused: number;
  /** Failed creations that named their job id and its outcome (not created, or unknown). */
  failuresNamingTheJob: number;
  creationP50Ms: number;
  creationP99Ms: number;
}

export function summarizeCreations(creations: readonly Creation[]): TrafficSummary {
  const count = (status: number) =>
    creations.reduce((sum, c) => sum + c.statuses.filter((s) => s === status).length, 0);
  const accepted = creations.filter((creation) => creation.jobId !== null);
  const latencies = accepted.map((creation) => creation.latencyMs);
  return {
    creations: creations.length,
    accepted: accepted.length,
    notAccepted: creations.length - accepted.length,
    answers503: count(503),
    answers503WithoutRetryAfter: creations.reduce((sum, c) => sum + c.retryAfterMissing, 0),
    answers409: count(409),
    answers429: count(429),
    timeouts: count(-1),
    networkErrors: count(0),
    refused: creations.filter((creation) => creation.error !== null && creation.jobId === null)
      .length,
    failuresNamingTheJob: creations.reduce(
      (sum, c) => sum + c.notCreated.length + c.unsettled.length + (c.foundAfterUnknown ? 1 : 0),
      0,
    ),
    creationP50Ms: Math.round(percentile(latencies, 0.5)),
    creationP99Ms: Math.round(percentile(latencies, 0.99)),
  };
}

export interface OutcomeSummary {
  completed: number;
  failed: number;
  unfinished: number;
  failures: string[];
  /** `kind id status` of the first unfinished jobs: where to start looking when one is lost. */
  unfinishedJobs: string[];
}

/** Jobs the client saw neither completed nor failed. */
export function unfinishedOf(finished: readonly FinishedJob[]): FinishedJob[] {
  return finished.filter((job) => job.status !== 'completed' && job.status !== 'failed');
}

export function summarizeOutcomes(finished: readonly FinishedJob[]): OutcomeSummary {
  const failures = finished.filter((job) => job.status === 'failed');
  const unfinished = unfinishedOf(finished);
  return {
    completed: finished.filter((job) => job.status === 'completed').length,
    failed: failures.length,
    unfinished: unfinished.length,
    failures: [...new Set(failures.map((job) => `${job.kind}: ${job.error}`))].slice(0, 10),
    unfinishedJobs: unfinished.slice(0, 10).map((job) => `${job.kind} ${job.jobId} ${job.status}`),
  };
}

/** A fixed-width text table: the form every report of these scripts prints. */
export function table(rows: readonly Record<string, string | number>[]): string {
  if (rows.length === 0) return '(none)';
  const columns = Object.keys(rows[0]!);
  const widths = columns.map((column) =>
    Math.max(column.length, ...rows.map((row) => String(row[column] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, index) => cell.padEnd(widths[index]!))
      .join('  ')
      .trimEnd();
  return [
    line(columns),
    line(widths.map((width) => '-'.repeat(width))),
    ...rows.map((row) => line(columns.map((column) => String(row[column] ?? '')))),
  ].join('\n');
}
