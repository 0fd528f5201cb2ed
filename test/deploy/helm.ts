import { execFile as execFileCallback } from 'node:child_process';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT, provisionTools, toolPath } from '@tamp/scripts/infra/provision';
import tools from '@tamp/scripts/infra/tools.json';
import { parseAllDocuments, stringify } from 'yaml';

const execFile = promisify(execFileCallback);

export const CHART_DIR = join(PROJECT_ROOT, 'charts/tamp');
export const RELEASE = 'tamp';
export const NAMESPACE = 'tamp-system';

/** A rendered Kubernetes object, loosely typed: tests read the fields they assert on. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> } & Record<
    string,
    // biome-ignore lint/suspicious/noExplicitAny: arbitrary Kubernetes object fields
    any
  >;
  // biome-ignore lint/suspicious/noExplicitAny: arbitrary Kubernetes object fields
  spec?: any;
  data?: Record<string, string>;
  /** Roles and their bindings. */
  rules?: Array<Record<string, string[]>>;
  roleRef?: { kind: string; name: string };
  subjects?: Array<{ kind: string; name: string; namespace?: string }>;
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * The project's Helm (`.tools/bin/helm`, built by scripts/infra/provision.ts). The global setup
 * provisions it for local-process runs; a run against containers may not have, so build it then.
 */
export async function helmBinary(): Promise<string> {
  const helm = toolPath('helm');
  if (!existsSync(helm)) await provisionTools('helm');
  return helm;
}

/**
 * The Kubernetes version `helm template` renders for: without a cluster to ask, Helm assumes an
 * old default that the chart's kubeVersion refuses. The version the project's cluster runs.
 */
export const KUBE_VERSION = tools.goWrapped.kubernetes.version;

/**
 * Helm with the given arguments. Without `kubeconfig` it reaches no cluster (a developer's
 * config is never read); with one (a test control plane), `install --dry-run=server` and
 * `lookup` talk to that API server.
 */
export async function helm(
  args: string[],
  options: { kubeconfig?: string } = {},
): Promise<HelmResult> {
  const withVersion =
    args[0] === 'template' && !args.includes('--kube-version')
      ? [...args, '--kube-version', KUBE_VERSION]
      : args;
  try {
    const { stdout, stderr } = await execFile(await helmBinary(), withVersion, {
      cwd: PROJECT_ROOT,
      maxBuffer: 64 * 1024 * 1024,
      // Helm must not read a developer's kube config or repositories.
      env: {
        PATH: process.env.PATH ?? '',
        HOME: tmpdir(),
        KUBECONFIG: options.kubeconfig ?? '/dev/null',
      },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    return failedRun(error);
  }
}

/**
 * The values as `--set-json` arguments, one per top-level key: merged exactly as a values file
 * would be, with no file to leave behind.
 */
export async function valuesArgs(values: Record<string, unknown>): Promise<string[]> {
  return Object.entries(values).flatMap(([key, value]) => [
    '--set-json',
    `${key}=${JSON.stringify(value)}`,
  ]);
}

/** `helm template` with the given extra arguments; throws with Helm's message when it fails. */
export async function render(extraArgs: string[] = []): Promise<Manifest[]> {
  const result = await helm([
    'template',
    RELEASE,
    CHART_DIR,
    '--namespace',
    NAMESPACE,
    ...extraArgs,
  ]);
  if (result.code !== 0) throw new Error(`helm template failed:\n${result.stderr}`);
  return parseManifests(result.stdout);
}

export function parseManifests(text: string): Manifest[] {
  return parseAllDocuments(text)
    .map((document) => {
      if (document.errors.length > 0) throw document.errors[0];
      return document.toJSON() as Manifest | null;
    })
    .filter((manifest): manifest is Manifest => manifest !== null);
}

export function ofKind(manifests: Manifest[], kind: string): Manifest[] {
  return manifests.filter((manifest) => manifest.kind === kind);
}

export function componentOf(manifest: Manifest): string {
  const component = manifest.metadata.labels?.['app.kubernetes.io/component'];
  if (component === undefined) throw new Error(`${manifest.kind} ${manifest.metadata.name}`);
  return component;
}

/**
 * Sends manifests to a real API server as `kubectl apply --dry-run=server --validate=strict`:
 * every object is decoded, defaulted, validated (unknown or duplicate fields included) and
 * admitted exactly as an install would be, and nothing is stored. Returns kubectl's output; its
 * stderr holds the API server's warnings (e.g. an environment variable defined twice).
 */
export async function serverDryRun(
  kubeconfig: string,
  manifests: Manifest[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = execFile(
    toolPath('kubectl'),
    ['apply', '--dry-run=server', '--validate=strict', '-f', '-'],
    {
      env: { PATH: process.env.PATH ?? '', HOME: tmpdir(), KUBECONFIG: kubeconfig },
      maxBuffer: 64 * 1024 * 1024,
      timeout: 120_000,
    },
  );
  child.child.stdin?.end(manifests.map((manifest) => stringify(manifest)).join('---\n'));
  try {
    const { stdout, stderr } = await child;
    return { code: 0, stdout, stderr };
  } catch (error) {
    return failedRun(error);
  }
}

/** A command that exited non-zero (or could not run), as the result the callers compare. */
function failedRun(error: unknown): { code: number; stdout: string; stderr: string } {
  const failure = error as { code?: number; stdout?: string; stderr?: string };
  return {
    code: typeof failure.code === 'number' ? failure.code : 1,
    stdout: failure.stdout ?? '',
    stderr: failure.stderr ?? String(error),
  };
}
