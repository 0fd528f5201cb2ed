import { execFile as execFileCallback } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT, toolPath } from '@tamp/scripts/infra/provision';
import { SERVICE_NAMES } from '@tamp/scripts/stack/services';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createMetricsRegistry } from '../../services/kit/src/metrics';
import { asPromQL, DASHBOARD_FILE, dashboardQueries, labelNames, metricNames } from './dashboard';
import { ofKind, RELEASE, render, valuesArgs } from './helm';

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
  'tamp_operator_leader',
  'tamp_operator_reconciles_total',
  'tamp_operator_errors_total',
  'tamp_operator_desired_replicas',
  'tamp_operator_backlog',
];

/** The operator's views of its WorkerPools, each one line per pool. */
const REQUIRED_POOL_VIEWS = [
  { view: 'desired replicas', metric: 'tamp_operator_desired_replicas' },
  { view: 'backlog', metric: 'tamp_operator_backlog' },
];

/** The scrape jobs of Tamp's services, as the ServiceMonitor names them: <release>-<service>. */
const TAMP_JOBS = SERVICE_NAMES.map((name) => `${RELEASE}-${name}`);

/**
 * Scrape jobs that may share a namespace with Tamp and are not Tamp's: its dependencies
 * installed under names that start like the release, another release, other operators.
 */
const FOREIGN_JOBS = [
  `${RELEASE}-nats`,
  `${RELEASE}-mongodb`,
  `${RELEASE}-minio`,
  `${RELEASE}-worker-video`,
  `${RELEASE}-gateway-canary`,
  RELEASE,
  'other-gateway',
  'other-worker-image',
  'prometheus-operator',
  'kube-state-metrics',
];

/** The regular expressions of a query's `job` matchers (an equality matcher as its literal). */
function jobMatchers(expr: string): RegExp[] {
  return [...expr.matchAll(/\bjob\s*(=~|=)\s*"((?:[^"\\]|\\.)*)"/g)].map(([, op, value]) =>
    op === '=~'
      ? new RegExp(`^(?:${value!.replaceAll('\\\\', '\\')})$`)
      : new RegExp(`^${value!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`),
  );
}

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
        expr: asPromQL(query.expr, { namespace: 'tamp', rateInterval: '1m', release: 'tamp' }),
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

  it("counts only Tamp's own targets where a metric is not Tamp's alone", async () => {
    // up, process_* and nodejs_* come from every target of the namespace: each query reading
    // one must select Tamp's scrape jobs, and only those.
    const generic = (await dashboardQueries()).filter(({ expr }) =>
      metricNames(expr).some((name) => !name.startsWith('tamp_')),
    );
    expect(generic.length).toBeGreaterThan(0);
    for (const { panel, expr } of generic) {
      const matchers = jobMatchers(asPromQL(expr, { namespace: 'ns', rateInterval: '1m' }));
      expect(matchers.length, `${panel}: selects every target of the namespace`).toBeGreaterThan(0);
      const selected = (job: string) => matchers.every((matcher) => matcher.test(job));
      for (const job of FOREIGN_JOBS) expect(selected(job), `${panel}: counts ${job}`).toBe(false);
      expect(TAMP_JOBS.some(selected), `${panel}: counts none of Tamp's targets`).toBe(true);
    }
    const targets = generic.filter(({ expr }) => metricNames(expr).includes('up'));
    expect(targets.map(({ panel }) => panel)).toEqual(['Targets up']);
    const upMatchers = jobMatchers(
      asPromQL(targets[0]!.expr, { namespace: 'ns', rateInterval: '1m' }),
    );
    for (const job of TAMP_JOBS) {
      expect(
        upMatchers.every((matcher) => matcher.test(job)),
        `Targets up: misses ${job}`,
      ).toBe(true);
    }
  });

  it('shows the operator: its leader, reconciles and errors, and each pool', async () => {
    const queries = await dashboardQueries();
    for (const { view, metric } of REQUIRED_POOL_VIEWS) {
      const showing = queries.filter(
        ({ expr }) => metricNames(expr).includes(metric) && labelNames(expr).includes('workerpool'),
      );
      expect(showing.length, `${view} per WorkerPool`).toBeGreaterThan(0);
    }
    const errors = queries.filter(({ expr }) =>
      metricNames(expr).includes('tamp_operator_errors_total'),
    );
    expect(errors.some(({ expr }) => labelNames(expr).includes('source'))).toBe(true);
    // The local stack's operator has no Kubernetes API and reports none of these: its panels are
    // marked so that test/e2e/prometheus.test.ts can leave them to a cluster.
    for (const query of queries) {
      expect(query.needsKubernetes, query.panel).toBe(
        metricNames(query.expr).some((name) => name.startsWith('tamp_operator_')),
      );
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
