import { execFileSync } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startControlPlane } from '@tamp/scripts/infra/kubernetes/control-plane';
import { isAlive, pollUntil } from '@tamp/scripts/infra/kubernetes/processes';
import { describe, expect, it } from 'vitest';
import { useControlPlane } from '../support/kubernetes';

interface Owned {
  metadata: { name: string; ownerReferences?: Array<{ kind: string; name: string }> };
}
interface DeploymentStatus {
  metadata: { generation: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    unavailableReplicas?: number;
    conditions?: Array<{ type: string; status: string }>;
  };
}

const deployment = (namespace: string) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'web', namespace },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: 'web' } },
    template: {
      metadata: { labels: { app: 'web' } },
      spec: { containers: [{ name: 'web', image: 'registry.invalid/web:1' }] },
    },
  },
});

describe('the control plane (etcd, kube-apiserver, kube-controller-manager)', () => {
  const cluster = useControlPlane();

  it('reports the pinned Kubernetes version', async () => {
    const version = JSON.parse(await cluster.kubectl(['version', '-o', 'json'])) as {
      serverVersion: { gitVersion: string };
    };
    expect(version.serverVersion.gitVersion).toMatch(/^v1\.\d+\.\d+$/);
  });

  it('turns a Deployment into a ReplicaSet and Pods, and reports its status', async () => {
    const namespace = await cluster.namespace('deploy');
    await cluster.kubectl(['apply', '-f', '-'], JSON.stringify(deployment(namespace)));

    const replicaSets = await pollUntil(
      'a ReplicaSet of the Deployment',
      async () => {
        const { body } = await cluster.api<{ items: Owned[] }>(
          'GET',
          `/apis/apps/v1/namespaces/${namespace}/replicasets`,
        );
        return body.items.length > 0 ? body.items : undefined;
      },
      30_000,
    );
    expect(replicaSets).toHaveLength(1);
    expect(replicaSets[0]!.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Deployment', name: 'web' }),
    ]);

    const pods = await pollUntil(
      'two Pods of the ReplicaSet',
      async () => {
        const { body } = await cluster.api<{ items: Owned[] }>(
          'GET',
          `/api/v1/namespaces/${namespace}/pods`,
        );
        return body.items.length === 2 ? body.items : undefined;
      },
      30_000,
    );
    for (const pod of pods) {
      expect(pod.metadata.ownerReferences).toEqual([
        expect.objectContaining({ kind: 'ReplicaSet', name: replicaSets[0]!.metadata.name }),
      ]);
    }

    // Nothing schedules pods here: the Deployment is observed, with two replicas unavailable.
    const observed = await pollUntil(
      'the Deployment status',
      async () => {
        const { body } = await cluster.api<DeploymentStatus>(
          'GET',
          `/apis/apps/v1/namespaces/${namespace}/deployments/web`,
        );
        return body.status?.observedGeneration === body.metadata.generation &&
          body.status?.replicas === 2
          ? body
          : undefined;
      },
      30_000,
    );
    expect(observed.status).toMatchObject({
      replicas: 2,
      updatedReplicas: 2,
      unavailableReplicas: 2,
    });
    expect(observed.status?.conditions).toEqual(
      expect.arrayContaining([expect.objectContaining({ type: 'Progressing', status: 'True' })]),
    );
  });

  it('gives the default service account a token the API server accepts', async () => {
    const namespace = await cluster.namespace('token');
    // The service-account controller creates `default` shortly after the namespace, not with it.
    await pollUntil(
      'the default service account',
      async () => {
        const { status } = await cluster.api(
          'GET',
          `/api/v1/namespaces/${namespace}/serviceaccounts/default`,
        );
        return status === 200 ? true : undefined;
      },
      30_000,
    );
    const token = (await cluster.kubectl(['-n', namespace, 'create', 'token', 'default'])).trim();
    const review = await cluster.api<{
      status: { authenticated: boolean; user: { username: string } };
    }>('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token },
    });
    expect(review.body.status.authenticated).toBe(true);
    expect(review.body.status.user.username).toBe(`system:serviceaccount:${namespace}:default`);
  });
});

describe('startControlPlane on its own data folder', () => {
  it('is idempotent, and stopping leaves no process running', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'tamp-k8s-idem-'));
    try {
      const first = await startControlPlane({ dataDir });
      const second = await startControlPlane({ dataDir });
      expect(second.pids).toEqual(first.pids);
      expect(second.server).toBe(first.server);

      await second.stop();
      await first.stop();
      for (const pid of first.pids) expect(isAlive(pid)).toBe(false);
      const ps = execFileSync('ps', ['-eo', 'args='], { encoding: 'utf8' });
      expect(ps.split('\n').filter((line) => line.includes(dataDir))).toEqual([]);
      // Everything it wrote is in the data folder: certificates, etcd, logs, kubeconfig.
      expect((await readdir(dataDir)).sort()).toEqual(
        expect.arrayContaining(['etcd', 'kubeconfig', 'logs', 'pki']),
      );
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});
