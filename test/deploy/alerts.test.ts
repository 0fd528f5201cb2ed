import { execFile as execFileCallback } from 'node:child_process';
import { copyFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT, toolPath } from '@tamp/scripts/infra/provision';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { ofKind, render, valuesArgs } from './helm';

const execFile = promisify(execFileCallback);

const ALERT_TESTS_DIR = join(PROJECT_ROOT, 'test/deploy/alerts');
const RUNBOOKS = join(PROJECT_ROOT, 'docs/runbooks.md');
/** Where runbook_url points when metrics.prometheusRule.runbookBaseUrl is not set. */
const DEFAULT_RUNBOOKS_URL = 'docs/runbooks.md';
/** What each alert's section of the runbooks says, in this order. */
const RUNBOOK_PARTS = [
  '**What it means.**',
  '**Confirm.**',
  '**Likely causes.**',
  '**What to do.**',
];

/**
 * The values the unit tests of test/deploy/alerts/ are written for: the alerts on, and two
 * workers scaled by the operator (WorkerPools tamp-worker-image, maxReplicas 8, and
 * tamp-worker-audio, maxReplicas 10), so that every alert of the chart is rendered. Everything
 * the tests depend on is set here, not taken from the chart's defaults.
 */
const TEST_VALUES = {
  metrics: { prometheusRule: { enabled: true } },
  operator: { enabled: true },
  workerImage: { autoscaling: { enabled: true, mode: 'operator', maxReplicas: 8 } },
  workerAudio: { autoscaling: { enabled: true, mode: 'operator', maxReplicas: 10 } },
  workerText: { autoscaling: { enabled: false } },
};

/** No worker scaled by the operator. */
const NO_POOLS = {
  workerImage: { autoscaling: { enabled: false } },
  workerAudio: { autoscaling: { enabled: false } },
  workerText: { autoscaling: { enabled: false } },
};

interface AlertRule {
  alert: string;
  expr: string;
  annotations?: Record<string, string>;
}

interface AlertTestFile {
  tests: Array<{
    alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }>;
  }>;
}

async function renderAlerts(values: Record<string, unknown>): Promise<AlertRule[]> {
  const [rule] = ofKind(await render(await valuesArgs(values)), 'PrometheusRule');
  const groups = rule!.spec.groups as Array<{ rules: AlertRule[] }>;
  return groups.flatMap((group) => group.rules);
}

/** The anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped. */
function headingAnchors(markdown: string): Map<string, string> {
  const sections = new Map<string, string>();
  const parts = markdown.split(/^(?=#{1,6} )/m);
  for (const part of parts) {
    const heading = part.match(/^#{1,6} (.+)$/m)?.[1];
    if (heading === undefined) continue;
    const anchor = heading
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    sections.set(anchor, part);
  }
  return sections;
}

/**
 * The chart's PrometheusRule, rendered by Helm, evaluated by Prometheus' own rule engine:
 * `promtool check rules` parses it and `promtool test rules` runs the unit tests of
 * test/deploy/alerts/ (series in, alerts expected out) against it.
 */
describe("the chart's alerts", () => {
  let dir: string;
  let alerts: AlertRule[];
  let testFiles: string[];

  beforeAll(async () => {
    const manifests = await render(await valuesArgs(TEST_VALUES));
    const [rule] = ofKind(manifests, 'PrometheusRule');
    const groups = rule!.spec.groups as Array<{ rules: AlertRule[] }>;
    alerts = groups.flatMap((group) => group.rules);
    dir = await mkdtemp(join(tmpdir(), 'tamp-alerts-'));
    // promtool reads rule_files relative to the test file: all go to one folder.
    await writeFile(join(dir, 'rules.yaml'), stringify({ groups }));
    testFiles = (await readdir(ALERT_TESTS_DIR)).filter((name) => name.endsWith('.test.yaml'));
    for (const name of testFiles) await copyFile(join(ALERT_TESTS_DIR, name), join(dir, name));
  });

  afterAll(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('parse as Prometheus rules', async () => {
    const { stdout } = await execFile(toolPath('promtool'), ['check', 'rules', 'rules.yaml'], {
      cwd: dir,
    });
    expect(stdout).toContain(`SUCCESS: ${alerts.length} rules found`);
  });

  it('pass their promtool unit tests', async () => {
    expect(testFiles.length).toBeGreaterThan(1);
    const result = await execFile(toolPath('promtool'), ['test', 'rules', ...testFiles], {
      cwd: dir,
    }).catch((error: { stdout: string; stderr: string }) => error);
    for (const name of testFiles) expect(result.stdout).toContain(`Unit Testing:  ${name}`);
    expect(`${result.stdout}${result.stderr}`).toMatch(/SUCCESS/);
    expect(result.stderr, result.stdout).not.toMatch(/FAILED/);
  });

  it('are each tested both firing and silent', async () => {
    const checks: Array<{ alertname: string; exp_alerts?: unknown[] }> = [];
    for (const name of testFiles) {
      const file = parse(await readFile(join(ALERT_TESTS_DIR, name), 'utf8')) as AlertTestFile;
      checks.push(...file.tests.flatMap((test) => test.alert_rule_test ?? []));
    }
    for (const { alert } of alerts) {
      const ofAlert = checks.filter((check) => check.alertname === alert);
      expect(
        ofAlert.some((check) => (check.exp_alerts ?? []).length > 0),
        `${alert} is never expected to fire`,
      ).toBe(true);
      expect(
        ofAlert.some((check) => (check.exp_alerts ?? []).length === 0),
        `${alert} is never expected to stay silent`,
      ).toBe(true);
    }
  });

  it('each carry a summary, a description and a runbook_url to their section of the runbooks', async () => {
    const sections = headingAnchors(await readFile(RUNBOOKS, 'utf8'));
    for (const { alert, annotations = {} } of alerts) {
      expect(annotations.summary?.trim(), `${alert}: summary`).toBeTruthy();
      // Which service and what value: the description is a template of the alert's labels or value.
      expect(annotations.description, `${alert}: description`).toMatch(
        /\{\{[^}]*\$(labels\.\w+|value)[^}]*\}\}/,
      );
      const url = annotations.runbook_url ?? '';
      const [page, anchor] = url.split('#');
      expect(page, `${alert}: runbook_url ${url}`).toBe(DEFAULT_RUNBOOKS_URL);
      expect(anchor, `${alert}: runbook_url ${url}`).toBe(alert.toLowerCase());
      const section = sections.get(anchor!);
      expect(section, `${alert}: no heading #${anchor} in docs/runbooks.md`).toBeDefined();
      for (const part of RUNBOOK_PARTS) {
        expect(section, `${alert}: its runbook section lacks ${part}`).toContain(part);
      }
    }
  });

  it('have a runbook section for every alert, and none for alerts that do not exist', async () => {
    const sections = headingAnchors(await readFile(RUNBOOKS, 'utf8'));
    const documented = [...sections.keys()].filter((anchor) => anchor.startsWith('tamp'));
    expect(documented.sort()).toEqual(alerts.map(({ alert }) => alert.toLowerCase()).sort());
  });

  it('watch the pools the chart renders, and the operator only when it runs', async () => {
    const names = (rules: AlertRule[]) => rules.map((rule) => rule.alert);
    const atMax = alerts.find((rule) => rule.alert === 'TampWorkerPoolAtMaxReplicas');
    // Each pool with its own maxReplicas from the chart's values.
    expect(atMax?.expr).toContain('workerpool="tamp-worker-image"}) >= 8');
    expect(atMax?.expr).toContain('workerpool="tamp-worker-audio"}) >= 10');
    expect(atMax?.expr).not.toContain('tamp-worker-text');

    // No worker scaled by the operator: no pool to watch, the operator still runs.
    const alerting = { metrics: { prometheusRule: { enabled: true } } };
    const noPools = names(await renderAlerts({ ...alerting, ...NO_POOLS }));
    expect(noPools).toContain('TampOperatorNoLeader');
    expect(noPools).toContain('TampOperatorReconcileErrors');
    expect(noPools).not.toContain('TampWorkerPoolAtMaxReplicas');
    // A worker scaled by an HPA has no WorkerPool either.
    const hpa = await renderAlerts({
      ...alerting,
      ...NO_POOLS,
      workerImage: { autoscaling: { enabled: true, mode: 'hpa' } },
    });
    expect(names(hpa)).not.toContain('TampWorkerPoolAtMaxReplicas');

    const withoutOperator = names(
      await renderAlerts({ ...alerting, ...NO_POOLS, operator: { enabled: false } }),
    );
    expect(withoutOperator.filter((name) => /Operator|WorkerPool/.test(name))).toEqual([]);
    expect(withoutOperator).toContain('TampServiceDown');
  });

  it('fire for a service whose targets vanished', () => {
    const serviceDown = alerts.find((rule) => rule.alert === 'TampServiceDown');
    expect(serviceDown?.expr).toContain('absent(up{namespace="tamp-system", job="tamp-gateway"})');
  });

  it('point runbook_url at metrics.prometheusRule.runbookBaseUrl when it is set', async () => {
    const base = 'https://docs.example.com/tamp/runbooks.html';
    const rules = await renderAlerts({
      metrics: { prometheusRule: { enabled: true, runbookBaseUrl: base } },
    });
    for (const { alert, annotations = {} } of rules) {
      expect(annotations.runbook_url).toBe(`${base}#${alert.toLowerCase()}`);
    }
  });
});
