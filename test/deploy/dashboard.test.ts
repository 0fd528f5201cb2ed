import { execFile as execFileCallback } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT, toolPath } from '@tamp/scripts/infra/provision';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createMetricsRegistry } from '../../services/kit/src/metrics';
import { asPromQL, DASHBOARD_FILE, dashboardQueries, labelNames, metricNames } from './dashboard';
import { ofKind, render, valuesArgs } from './helm';

const execFile = promisify(execFileCallback);

/** What an operator must find on the dashboard (issue 13), by the metric that shows it. */
const REQUIRED_METRICS = [
  'tamp_http_requests_total',
  'tamp_http_request_duration_seconds_bucket',
  'tamp_jobs_created_total',
  'tamp_jobs_finished_total',
  'tamp_job_duration_seconds_bucket',
  'tamp_queue_messages',
  'process_resident_memory_bytes',
  'tamp_worker_admission_waits_total',
  'tamp_image_memory_waiting_jobs',
  'tamp_credits_reserved_total',
  'tamp_credits_refunded_total',
  'tamp_webhook_deliveries_total',
  'tamp_webhook_retries_pending',
];

/**
 * The job views issue 13 asks for, each by pipeline and preset: a query reading `metric`, naming
 * every one of `labels` and containing `shape` (a matcher or the quantile it computes).
 */
const REQUIRED_JOB_VIEWS = [
  { view: 'jobs created', metric: 'tamp_jobs_created_total', shape: 'tamp_jobs_created_total{' },
  { view: 'jobs completed', metric: 'tamp_jobs_finished_total', shape: 'status="completed"' },
  { view: 'jobs failed', metric: 'tamp_jobs_finished_total', shape: 'status="failed"' },
  { view: 'latency p50', metric: 'tamp_job_duration_seconds_bucket', shape: 'quantile(0.5,' },
  { view: 'latency p95', metric: 'tamp_job_duration_seconds_bucket', shape: 'quantile(0.95,' },
].map((view) => ({ ...view, labels: ['pipeline', 'preset'] }));

/** Labels every series has: the scrape's target labels, and `service` from each registry. */
const TARGET_LABELS = ['namespace', 'job', 'instance', 'pod', 'service'];

/**
 * The label names a metric of the services may carry, read from the source files that name it:
 * the words of their string arrays (`labelNames: ['outcome']`, `[...JOB_LABELS, 'status']`).
 * Coarse (a label of another metric of the same file passes) but a misspelt label fails; the
 * live check, series by series, is test/e2e/prometheus.test.ts. Histogram series add `le`.
 */
async function labelsDefinedFor(name: string): Promise<Set<string>> {
  const metric = name.replace(/_(bucket|sum|count)$/, '');
  const { stdout } = await execFile('grep', [
    '-rlF',
    `'${metric}'`,
    join(PROJECT_ROOT, 'services'),
    '--include=*.ts',
    '--exclude=*.test.ts',
  ]).catch(() => ({ stdout: '' }));
  const labels = new Set(TARGET_LABELS);
  if (name.endsWith('_bucket')) labels.add('le');
  for (const file of stdout.split('\n').filter((line) => line !== '')) {
    const source = await readFile(file, 'utf8');
    for (const [array] of source.matchAll(/\[(?:\s*(?:\.\.\.[A-Za-z_]+|'[a-z_]+')\s*,?)+\s*\]/g)) {
      for (const [, label] of array.matchAll(/'([a-z_]+)'/g)) labels.add(label!);
    }
  }
  return labels;
}

/**
 * The names the services export: Tamp's own, written as a literal in services/ (a
 * histogram adds _bucket, _sum and _count), prom-client's defaults as every service registers
 * them, and Prometheus' own `up`. The live check is test/e2e/prometheus.test.ts, which runs
 * every panel query against a Prometheus scraping the stack.
 */
async function exportedNames(): Promise<Set<string>> {
  const { stdout } = await execFile(
    'grep',
    [
      '-rhoE',
      "'tamp_[a-z_]+'",
      join(PROJECT_ROOT, 'services'),
      '--include=*.ts',
      '--exclude=*.test.ts',
    ],
    { maxBuffer: 16 * 1024 * 1024 },
  );
  const own = stdout.split('\n').flatMap((line) => line.match(/tamp_[a-z_]+/) ?? []);
  const defaults = (await createMetricsRegistry('names').getMetricsAsJSON()).map(
    (metric) => metric.name,
  );
  return new Set(
    [...own, ...defaults, 'up'].flatMap((name) => [
      name,
      `${name}_bucket`,
      `${name}_sum`,
      `${name}_count`,
    ]),
  );
}

describe('the Grafana dashboard', () => {
  it('ships in a ConfigMap the Grafana sidecar loads, only when enabled', async () => {
    const defaults = await render();
    expect(ofKind(defaults, 'ConfigMap').filter((map) => map.data?.['tamp.json'])).toEqual([]);

    const enabled = await render(
      await valuesArgs({
        metrics: { dashboard: { enabled: true, annotations: { grafana_folder: 'Tamp' } } },
      }),
    );
    const maps = ofKind(enabled, 'ConfigMap').filter((map) => map.data?.['tamp.json']);
    expect(maps).toHaveLength(1);
    const map = maps[0]!;
    expect(map.metadata.labels?.grafana_dashboard).toBe('1');
    expect(map.metadata.annotations).toEqual({ grafana_folder: 'Tamp' });
    expect(JSON.parse(map.data!['tamp.json']!)).toEqual(
      JSON.parse(await readFile(DASHBOARD_FILE, 'utf8')),
    );
  });

  it('has queries Prometheus parses', async () => {
    const queries = await dashboardQueries();
    expect(queries.length).toBeGreaterThan(10);
    const dir = await mkdtemp(join(tmpdir(), 'tamp-dashboard-'));
    try {
      // promtool parses rule files, not single queries: each query becomes a recording rule.
      const rules = queries.map((query, index) => ({
        record: `dashboard:query_${index}`,
        expr: asPromQL(query.expr, { namespace: 'tamp', rateInterval: '1m' }),
      }));
      await writeFile(join(dir, 'queries.yaml'), stringify({ groups: [{ name: 'q', rules }] }));
      const { stdout } = await execFile(toolPath('promtool'), ['check', 'rules', 'queries.yaml'], {
        cwd: dir,
      });
      expect(stdout).toContain(`SUCCESS: ${queries.length} rules found`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reads only metrics the services export, and every one the operator needs', async () => {
    const exported = await exportedNames();
    const used = new Set<string>();
    for (const query of await dashboardQueries()) {
      for (const name of metricNames(query.expr)) {
        expect(exported.has(name), `${query.panel}: ${name} is not exported`).toBe(true);
        used.add(name);
      }
    }
    for (const name of REQUIRED_METRICS) expect(used, name).toContain(name);
  });

  it('groups and selects only by labels the metrics carry', async () => {
    for (const query of await dashboardQueries()) {
      for (const name of metricNames(query.expr)) {
        const defined = await labelsDefinedFor(name);
        for (const label of labelNames(query.expr)) {
          expect(defined.has(label), `${query.panel}: ${name} has no label ${label}`).toBe(true);
        }
      }
    }
  });

  it('shows jobs created, completed, failed and their latency by pipeline and preset', async () => {
    const queries = await dashboardQueries();
    for (const { view, metric, shape, labels } of REQUIRED_JOB_VIEWS) {
      const showing = queries.filter(
        ({ expr }) =>
          metricNames(expr).includes(metric) &&
          expr.includes(shape) &&
          labels.every((label) => labelNames(expr).includes(label)),
      );
      expect(showing.length, `${view} by ${labels.join(' and ')}`).toBeGreaterThan(0);
    }
  });
});
