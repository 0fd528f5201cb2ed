import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apiRequest, kubectl } from '@tamp/scripts/infra/kubernetes/api';
import {
  type RunningControlPlane,
  startControlPlane,
} from '@tamp/scripts/infra/kubernetes/control-plane';
import { afterAll, beforeAll } from 'vitest';

export interface TestControlPlane {
  /** The running control plane (throws before `beforeAll` has run). */
  readonly current: RunningControlPlane;
  /** kubectl against it, as cluster admin. */
  kubectl(args: string[], input?: string): Promise<string>;
  /** A new namespace with a random name, for one test's objects. */
  namespace(prefix?: string): Promise<string>;
  /** A request to the API server as cluster admin; the body is parsed JSON. */
  api<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }>;
}

/**
 * How long a start may wait for the binaries: a test run builds them in the background while its
 * other tests run (test/setup/kubernetes-builds.ts), and where nothing was built that takes
 * about 20 minutes of both cores.
 */
const BINARIES_WAIT_MS = 60 * 60_000;

/**
 * A fresh control plane (etcd, kube-apiserver, kube-controller-manager) for one test file,
 * started in `beforeAll` (a few seconds once the binaries are built) and stopped in `afterAll`
 * with its data folder removed. Use `namespace()` to keep tests of the file apart.
 */
export function useControlPlane(): TestControlPlane {
  let controlPlane: RunningControlPlane | undefined;
  let dataDir: string | undefined;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'tamp-k8s-'));
    controlPlane = await startControlPlane({ dataDir });
  }, BINARIES_WAIT_MS);
  afterAll(async () => {
    await controlPlane?.stop();
    if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
  });

  const current = (): RunningControlPlane => {
    if (controlPlane === undefined) throw new Error('the control plane starts in beforeAll');
    return controlPlane;
  };
  return {
    get current() {
      return current();
    },
    kubectl: (args, input) => kubectl(current().kubeconfigPath, args, { input }),
    async namespace(prefix = 't') {
      const name = `${prefix}-${randomBytes(4).toString('hex')}`;
      await kubectl(current().kubeconfigPath, ['create', 'namespace', name]);
      return name;
    },
    async api<T>(method: string, path: string, body?: unknown) {
      const response = await apiRequest(current().credentials, method, path, { body });
      return { status: response.status, body: JSON.parse(response.body) as T };
    },
  };
}
