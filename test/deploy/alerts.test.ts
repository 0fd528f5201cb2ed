import { execFile as execFileCallback } from 'node:child_process';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT, toolPath } from '@tamp/scripts/infra/provision';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { ofKind, render, valuesArgs } from './helm';

const execFile = promisify(execFileCallback);

const ALERT_TESTS = join(PROJECT_ROOT, 'test/deploy/alerts/tamp-alerts.test.yaml');

interface AlertRule {
  alert: string;
  expr: string;
}

interface AlertTestFile {
  tests: Array<{
    alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }>;
  }>;
}

/**
 * The chart's PrometheusRule, rendered by Helm, evaluated by Prometheus' own rule engine:
 * `promtool check rules` parses it and `promtool test rules` runs the unit tests of
 * test/deploy/alerts/ (series in, alerts expected out) against it.
 */
describe("the chart's alerts", () => {
  let dir: string;
  let alerts: AlertRule[];

  beforeAll(async () => {
    const manifests = await render(
      await valuesArgs({ metrics: { prometheusRule: { enabled: true } } }),
    );
    const [rule] = ofKind(manifests, 'PrometheusRule');
    const groups = rule!.spec.groups as Array<{ rules: AlertRule[] }>;
    alerts = groups.flatMap((group) => group.rules);
    dir = await mkdtemp(join(tmpdir(), 'tamp-alerts-'));
    // promtool reads rule_files relative to the test file: both go to one folder.
    await writeFile(join(dir, 'rules.yaml'), stringify({ groups }));
    await copyFile(ALERT_TESTS, join(dir, 'tamp-alerts.test.yaml'));
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
    const result = await execFile(
      toolPath('promtool'),
      ['test', 'rules', 'tamp-alerts.test.yaml'],
      {
        cwd: dir,
      },
    ).catch((error: { stdout: string; stderr: string }) => error);
    expect(`${result.stdout}${result.stderr}`).toMatch(/SUCCESS/);
    expect(result.stderr, result.stdout).not.toMatch(/FAILED/);
  });

  it('are each tested both firing and silent', async () => {
    const file = parse(await readFile(ALERT_TESTS, 'utf8')) as AlertTestFile;
    const checks = file.tests.flatMap((test) => test.alert_rule_test ?? []);
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

  it('fire for a service whose targets vanished', () => {
    const serviceDown = alerts.find((rule) => rule.alert === 'TampServiceDown');
    expect(serviceDown?.expr).toContain('absent(up{namespace="tamp-system", job="tamp-gateway"})');
  });
});
