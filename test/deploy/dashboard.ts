import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PROJECT_ROOT } from '@tamp/scripts/infra/provision';
import { RELEASE } from './helm';

export const DASHBOARD_FILE = join(PROJECT_ROOT, 'charts/tamp/dashboards/tamp.json');

export interface PanelQuery {
  panel: string;
  expr: string;
  /**
   * The query reads the operator's metrics (`tamp_operator_*`), which it reports only while it
   * watches a Kubernetes API: the local stack's operator idles and has none. Such a query can be
   * answered only by a Prometheus scraping Tamp on Kubernetes.
   */
  needsKubernetes: boolean;
}

interface Panel {
  title: string;
  type: string;
  targets?: Array<{ expr: string }>;
}

/** Every query of every panel of the chart's Grafana dashboard. */
export async function dashboardQueries(): Promise<PanelQuery[]> {
  const dashboard = JSON.parse(await readFile(DASHBOARD_FILE, 'utf8')) as { panels: Panel[] };
  return dashboard.panels.flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({
      panel: panel.title,
      expr: target.expr,
      needsKubernetes: metricNames(target.expr).some((name) => name.startsWith('tamp_operator_')),
    })),
  );
}

/**
 * A panel query as Prometheus receives it from Grafana: the dashboard's `$namespace` and
 * `$release` variables and Grafana's `$__rate_interval` replaced by values. `release` is the
 * chart's full name, the prefix of every scrape job (`<release>-<service>`); the tests' release,
 * `tamp`, when not given.
 */
export function asPromQL(
  expr: string,
  values: { namespace: string; rateInterval: string; release?: string },
) {
  return expr
    .replaceAll('$namespace', values.namespace)
    .replaceAll('$release', values.release ?? RELEASE)
    .replaceAll('$__rate_interval', values.rateInterval);
}

/** A query with its string literals emptied, so nothing inside a label value is read as syntax. */
function withoutStrings(expr: string): string {
  return expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
}

/**
 * The metric names a query reads. Every query selects by namespace, so each metric is written
 * `name{…}`; a selector without a name would escape this check and is reported as `{`.
 */
export function metricNames(expr: string): string[] {
  return [...withoutStrings(expr).matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)?\{/g)].map(
    (match) => match[1] ?? '{',
  );
}

/**
 * The label names a query reads: those its selectors match on (`{status="failed"}`) and those
 * it groups or joins by (`by (pipeline, preset)`, `without`, `on`, `ignoring`, `group_left`…).
 */
export function labelNames(expr: string): string[] {
  const query = withoutStrings(expr);
  const matched = [...query.matchAll(/\{([^}]*)\}/g)].flatMap(([, matchers]) =>
    [...matchers!.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)].map((match) => match[1]!),
  );
  const grouped = [
    ...query.matchAll(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g),
  ].flatMap(([, names]) =>
    names!
      .split(',')
      .map((name) => name.trim())
      .filter((name) => name !== ''),
  );
  return [...new Set([...matched, ...grouped])];
}
