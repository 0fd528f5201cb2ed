import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PROJECT_ROOT } from '@tamp/scripts/infra/provision';
import { describe, expect, it } from 'vitest';
import { CHART_DIR, helm } from '../../../test/deploy/helm';
import type { WorkerPool } from '../src/domain/worker-pool';
import { OPERATOR_NAME, useOperatorWorld } from './harness';

interface Status {
  kind: string;
  code: number;
  message: string;
}

describe('the WorkerPool CRD on a real API server', () => {
  const world = useOperatorWorld();
  const { cluster } = world;

  const create = (namespace: string, spec: Record<string, unknown>, name = 'pool') =>
    cluster.api<WorkerPool & Status>(
      'POST',
      `/apis/tamp.dev/v1alpha1/namespaces/${namespace}/workerpools`,
      { apiVersion: 'tamp.dev/v1alpha1', kind: 'WorkerPool', metadata: { name }, spec },
    );

  it('applies the defaults of the schema', async () => {
    const namespace = await cluster.namespace('crd');
    const { status, body } = await create(namespace, { deployment: 'w', pipeline: 'audio' });
    expect(status).toBe(201);
    expect(body.spec).toEqual({
      deployment: 'w',
      pipeline: 'audio',
      minReplicas: 1,
      maxReplicas: 10,
      targetBacklogPerReplica: 10,
      scaleDownStabilizationSeconds: 300,
      pollIntervalSeconds: 15,
    });
  });

  it('refuses invalid WorkerPools, naming the field', async () => {
    const namespace = await cluster.namespace('crd');
    const cases: Array<[Record<string, unknown>, string]> = [
      [
        { deployment: 'w', pipeline: 'audio', minReplicas: 5, maxReplicas: 2 },
        'minReplicas must not exceed maxReplicas',
      ],
      [{ deployment: 'w', pipeline: 'video' }, 'spec.pipeline'],
      [{ deployment: 'w', pipeline: 'audio', minReplicas: -1 }, 'spec.minReplicas'],
      [{ deployment: 'w', pipeline: 'audio', maxReplicas: 0 }, 'spec.maxReplicas'],
      [
        { deployment: 'w', pipeline: 'audio', targetBacklogPerReplica: 0 },
        'spec.targetBacklogPerReplica',
      ],
      [{ deployment: 'w', pipeline: 'audio', pollIntervalSeconds: 0 }, 'spec.pollIntervalSeconds'],
      [
        { deployment: 'w', pipeline: 'audio', scaleDownStabilizationSeconds: 7200 },
        'spec.scaleDownStabilizationSeconds',
      ],
      [{ deployment: 'Not_A_Name', pipeline: 'audio' }, 'spec.deployment'],
      [{ pipeline: 'audio' }, 'spec.deployment'],
      [{ deployment: 'w', pipeline: 'audio', minReplicas: 'two' }, 'spec.minReplicas'],
    ];
    for (const [index, [spec, mention]] of cases.entries()) {
      const { status, body } = await create(namespace, spec, `bad-${index}`);
      expect(status, JSON.stringify(spec)).toBe(422);
      expect(body.message, JSON.stringify(spec)).toContain(mention);
    }
    // The rule holds on update too, and kubectl scale cannot lift the floor above the ceiling.
    expect(
      (await create(namespace, { deployment: 'w', pipeline: 'text', maxReplicas: 3 })).status,
    ).toBe(201);
    await expect(
      cluster.kubectl(['-n', namespace, 'scale', 'workerpool/pool', '--replicas=4']),
    ).rejects.toThrow('minReplicas must not exceed maxReplicas');
    await cluster.kubectl(['-n', namespace, 'scale', 'workerpool/pool', '--replicas=0']);
    const scaled = JSON.parse(
      await cluster.kubectl(['-n', namespace, 'get', 'workerpool/pool', '-o', 'json']),
    ) as WorkerPool;
    expect(scaled.spec.minReplicas).toBe(0);
  });

  it('keeps spec and status apart (status subresource) and serves the scale subresource', async () => {
    const namespace = await cluster.namespace('crd');
    await create(namespace, { deployment: 'w', pipeline: 'image', minReplicas: 2 });
    const path = `/apis/tamp.dev/v1alpha1/namespaces/${namespace}/workerpools/pool`;
    // A status written with the object is dropped; the spec written through /status too.
    const replaced = await cluster.api<WorkerPool>('GET', path);
    await cluster.api('PUT', path, { ...replaced.body, status: { backlog: 99 } });
    expect((await cluster.api<WorkerPool>('GET', path)).body.status).toBeUndefined();
    const current = (await cluster.api<WorkerPool>('GET', path)).body;
    const written = await cluster.api<WorkerPool>('PUT', `${path}/status`, {
      ...current,
      spec: { ...current.spec, maxReplicas: 99 },
      status: { backlog: 12, replicas: 2, desiredReplicas: 3, selector: 'app=w' },
    });
    expect(written.status).toBe(200);
    expect(written.body.spec.maxReplicas).toBe(10);
    expect(written.body.status?.backlog).toBe(12);
    const scale = await cluster.api<{
      spec: { replicas: number };
      status: { replicas: number; selector: string };
    }>('GET', `${path}/scale`);
    expect(scale.body).toMatchObject({
      spec: { replicas: 2 },
      status: { replicas: 2, selector: 'app=w' },
    });
  });

  it('prints pipeline, replicas, desired, backlog and age for kubectl get workerpools', async () => {
    const namespace = await cluster.namespace('crd');
    await create(namespace, { deployment: 'w', pipeline: 'audio' });
    await cluster.kubectl([
      ...['-n', namespace, 'patch', 'workerpool/pool', '--subresource=status', '--type=merge'],
      ...['-p', JSON.stringify({ status: { backlog: 7, replicas: 2, desiredReplicas: 4 } })],
    ]);
    const table = await cluster.kubectl(['-n', namespace, 'get', 'workerpools']);
    const [header, row] = table
      .trim()
      .split('\n')
      .map((line) => line.split(/\s+/));
    expect(header).toEqual(['NAME', 'PIPELINE', 'REPLICAS', 'DESIRED', 'BACKLOG', 'AGE']);
    expect(row!.slice(0, 5)).toEqual(['pool', 'audio', '2', '4', '7']);
    const wide = await cluster.kubectl(['-n', namespace, 'get', 'wp', '-o', 'wide']);
    expect(wide.split('\n')[0]!.split(/\s+/)).toEqual(
      expect.arrayContaining(['READY', 'DEPLOYMENT', 'MIN', 'MAX']),
    );
  });

  it('accepts the examples and the WorkerPools the chart renders', async () => {
    const namespace = await cluster.namespace('crd');
    const examples = await readFile(join(PROJECT_ROOT, 'k8s/examples/workerpools.yaml'), 'utf8');
    await cluster.kubectl(['-n', namespace, 'apply', '--dry-run=server', '-f', '-'], examples);
    const rendered = await helm([
      'template',
      'tamp',
      CHART_DIR,
      '--namespace',
      namespace,
      '--show-only',
      'templates/autoscaling.yaml',
      ...['workerAudio', 'workerImage', 'workerText'].flatMap((worker) => [
        '--set',
        `${worker}.autoscaling.enabled=true`,
      ]),
      '--set',
      'workerText.autoscaling.minReplicas=0',
    ]);
    expect(rendered.code, rendered.stderr).toBe(0);
    const applied = await cluster.kubectl(
      ['apply', '--dry-run=server', '-f', '-'],
      rendered.stdout,
    );
    expect(applied.match(/workerpool\.tamp\.dev/g)).toHaveLength(3);
  });

  it("gives the operator's ServiceAccount (the chart's Role) only the calls it makes", async () => {
    const { namespace } = await world.namespace('rbac');
    const canI = async (verb: string, resource: string, extra: string[] = []) => {
      const as = `--as=system:serviceaccount:${namespace}:${OPERATOR_NAME}`;
      try {
        await cluster.kubectl(['auth', 'can-i', verb, resource, '-n', namespace, as, ...extra]);
        return true;
      } catch {
        return false;
      }
    };
    const allowed: Array<[string, string, string[]?]> = [
      ['watch', 'workerpools.tamp.dev'],
      ['patch', 'workerpools.tamp.dev', ['--subresource=status']],
      ['watch', 'deployments.apps'],
      ['patch', 'deployments.apps', ['--subresource=scale']],
      ['create', 'events'],
      ['update', `leases.coordination.k8s.io/${OPERATOR_NAME}`],
    ];
    const refused: Array<[string, string, string[]?]> = [
      ['patch', 'workerpools.tamp.dev'],
      ['delete', 'workerpools.tamp.dev'],
      ['patch', 'deployments.apps'],
      ['delete', 'deployments.apps'],
      ['get', 'pods'],
      ['get', 'secrets'],
      ['update', 'leases.coordination.k8s.io/someone-else'],
      ['watch', 'workerpools.tamp.dev', ['--all-namespaces']],
    ];
    for (const [verb, resource, extra] of allowed) {
      expect(await canI(verb, resource, extra), `${verb} ${resource}`).toBe(true);
    }
    for (const [verb, resource, extra] of refused) {
      expect(await canI(verb, resource, extra), `${verb} ${resource}`).toBe(false);
    }
  });
});
