import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats, createLogger, provisionTopology } from '@tamp/kit';
import { createTopology } from '@tamp/proto';
import { freePort } from '@tamp/scripts/infra/launcher';
import { describe, expect, it } from 'vitest';
import { findCondition } from '../src/domain/conditions';
import type { WorkerPool } from '../src/domain/worker-pool';
import { moreReconciles, pollUntil, TestNatsServer, useOperatorWorld } from './harness';

const POOL = {
  deployment: 'worker-audio',
  pipeline: 'audio' as const,
  minReplicas: 1,
  maxReplicas: 10,
  targetBacklogPerReplica: 2,
  // No window: replicas that stay put are held by the failure handling, not by stabilization.
  scaleDownStabilizationSeconds: 0,
  pollIntervalSeconds: 1,
};

const condition = (pool: WorkerPool, type: Parameters<typeof findCondition>[1]) =>
  findCondition(pool.status?.conditions, type);

describe('the failure modes users hit with the KEDA scaler', () => {
  const world = useOperatorWorld();

  const poolWhere = (namespace: string, what: string, test: (pool: WorkerPool) => boolean) =>
    pollUntil(
      what,
      async () => {
        const pool = await world.pool(namespace, 'worker-audio');
        return test(pool) ? pool : undefined;
      },
      30_000,
    );

  it('keeps the replicas when the consumer is missing (KEDA went to maxReplicas), then follows it once it exists', async () => {
    const { namespace, kubeconfig } = await world.namespace('missing');
    // A NATS namespace nobody provisioned: no JOBS stream, no consumer.
    const natsNamespace = `${world.infrastructure.namespace}m`;
    await world.createDeployment(namespace, 'worker-audio', 3);
    await world.applyPool(namespace, 'worker-audio', POOL);
    const operator = await world.startOperator({
      kubeconfig,
      namespace,
      env: { NATS_NAMESPACE: natsNamespace },
    });

    const unavailable = await poolWhere(
      namespace,
      'BacklogUnavailable',
      (pool) => condition(pool, 'BacklogUnavailable')?.status === 'True',
    );
    expect(condition(unavailable, 'BacklogUnavailable')).toMatchObject({
      reason: 'ConsumerNotFound',
      observedGeneration: unavailable.metadata.generation,
    });
    expect(condition(unavailable, 'BacklogUnavailable')?.message).toContain('worker-audio');
    expect(condition(unavailable, 'Ready')).toMatchObject({
      status: 'False',
      reason: 'BacklogUnavailable',
    });
    expect(unavailable.status?.backlog).toBeUndefined();
    await moreReconciles(operator, 3); // three more looks at the pool, none of them scaling
    expect(await world.replicas(namespace, 'worker-audio')).toBe(3);
    expect((await world.pool(namespace, 'worker-audio')).status?.desiredReplicas).toBe(3);
    const warnings = (await world.events(namespace, 'worker-audio')).filter(
      (event) => event.type === 'Warning',
    );
    expect(warnings.map((event) => event.reason)).toEqual(['ConsumerNotFound']);

    // The services start and provision their topology: the pool follows the backlog.
    const topology = createTopology(natsNamespace);
    const logger = createLogger('operator-test', 'silent');
    const nats = await connectNats({ url: world.infrastructure.natsUrl, name: 'late', logger });
    try {
      await provisionTopology(nats, topology, 1);
      const js = (await import('@nats-io/jetstream')).jetstream(nats);
      for (let index = 0; index < 10; index++) await js.publish(topology.subjects.jobs.audio, '{}');
    } finally {
      await nats.close();
    }
    await poolWhere(
      namespace,
      'scale to ceil(10 / 2)',
      (pool) => pool.status?.desiredReplicas === 5,
    );
    expect(await world.replicas(namespace, 'worker-audio')).toBe(5);
    const recovered = await world.pool(namespace, 'worker-audio');
    expect(condition(recovered, 'BacklogUnavailable')).toMatchObject({ status: 'False' });
    expect(condition(recovered, 'Ready')).toMatchObject({ status: 'True' });
    expect(await world.eventReasons(namespace, 'worker-audio', 3)).toEqual([
      'BacklogRead',
      'ConsumerNotFound',
      'ScaledUp',
    ]);
  });

  it('keeps the replicas when JetStream refuses the read (a server without JetStream)', async () => {
    const { namespace, kubeconfig } = await world.namespace('unreadable');
    const server = new TestNatsServer(await freePort(), undefined);
    await server.start();
    try {
      await world.createDeployment(namespace, 'worker-audio', 2);
      await world.applyPool(namespace, 'worker-audio', POOL);
      const operator = await world.startOperator({
        kubeconfig,
        namespace,
        env: { NATS_URL: server.url },
      });
      const pool = await poolWhere(
        namespace,
        'BacklogUnavailable',
        (candidate) => condition(candidate, 'BacklogUnavailable')?.status === 'True',
      );
      expect(condition(pool, 'BacklogUnavailable')?.reason).toBe('ConsumerUnreadable');
      await moreReconciles(operator, 2);
      expect(await world.replicas(namespace, 'worker-audio')).toBe(2);
    } finally {
      await server.stop();
    }
  });

  it('keeps the replicas while NATS is unreachable, and follows the backlog again when it is back', async () => {
    const { namespace, kubeconfig } = await world.namespace('natsdown');
    const storeDir = await mkdtemp(join(tmpdir(), 'tamp-op-nats-'));
    const server = new TestNatsServer(await freePort(), storeDir);
    await server.start();
    try {
      const logger = createLogger('operator-test', 'silent');
      const nats = await connectNats({ url: server.url, name: 'setup', logger });
      await provisionTopology(nats, world.topology, 1);
      const js = (await import('@nats-io/jetstream')).jetstream(nats);
      for (let index = 0; index < 6; index++)
        await js.publish(world.topology.subjects.jobs.audio, '{}');
      await nats.close();

      await world.createDeployment(namespace, 'worker-audio', 1);
      await world.applyPool(namespace, 'worker-audio', POOL);
      const operator = await world.startOperator({
        kubeconfig,
        namespace,
        env: { NATS_URL: server.url },
      });
      await poolWhere(namespace, 'scale to 3', (pool) => pool.status?.desiredReplicas === 3);

      await server.stop();
      const down = await poolWhere(
        namespace,
        'NatsUnavailable',
        (pool) => condition(pool, 'BacklogUnavailable')?.reason === 'NatsUnavailable',
      );
      expect(condition(down, 'Ready')?.status).toBe('False');
      await moreReconciles(operator, 3);
      // Neither minReplicas (the backlog is not known to be empty) nor maxReplicas.
      expect(await world.replicas(namespace, 'worker-audio')).toBe(3);
      expect(await operator.ok('/healthz')).toBe(true);
      expect(await operator.ok('/readyz')).toBe(true);
      expect(
        await operator.metric('tamp_operator_backlog', { workerpool: 'worker-audio' }),
      ).toBeUndefined();

      await server.start();
      const back = await poolWhere(
        namespace,
        'the backlog read again',
        (pool) => condition(pool, 'BacklogUnavailable')?.status === 'False',
      );
      expect(back.status?.backlog).toBe(6);
      expect(condition(back, 'Ready')?.status).toBe('True');
      expect(await world.replicas(namespace, 'worker-audio')).toBe(3);
    } finally {
      await server.stop();
      await rm(storeDir, { recursive: true, force: true });
    }
  });

  it('reports a deleted Deployment instead of crashing, and scales it again once it is back', async () => {
    const { namespace, kubeconfig } = await world.namespace('deleted');
    await world.createDeployment(namespace, 'worker-audio', 1);
    await world.applyPool(namespace, 'worker-audio', { ...POOL, pipeline: 'image' });
    const operator = await world.startOperator({ kubeconfig, namespace });
    await poolWhere(namespace, 'Ready', (pool) => condition(pool, 'Ready')?.status === 'True');

    await world.cluster.kubectl([
      '-n',
      namespace,
      'delete',
      'deployment',
      'worker-audio',
      '--wait=false',
    ]);
    const missing = await poolWhere(
      namespace,
      'DeploymentMissing',
      (pool) => condition(pool, 'DeploymentMissing')?.status === 'True',
    );
    expect(condition(missing, 'Ready')).toMatchObject({
      status: 'False',
      reason: 'DeploymentMissing',
    });
    expect(missing.status?.replicas).toBeUndefined();
    const reconciles = await operator.metric('tamp_operator_reconciles_total', {
      result: 'status',
    });
    await moreReconciles(operator, 2); // it goes on looking at the pool, without failing
    expect(operator.exited).toBe(false);
    expect(await operator.ok('/healthz')).toBe(true);
    expect(
      await operator.metric('tamp_operator_errors_total', { source: 'reconcile' }),
    ).toBeUndefined();
    expect(
      (await world.events(namespace, 'worker-audio')).filter((event) => event.type === 'Warning'),
    ).toEqual([expect.objectContaining({ reason: 'DeploymentNotFound' })]);

    await world.queueJobs('image', 4);
    await world.createDeployment(namespace, 'worker-audio', 1);
    const found = await poolWhere(
      namespace,
      'the Deployment found and scaled',
      (pool) =>
        pool.status?.desiredReplicas === 2 &&
        condition(pool, 'DeploymentMissing')?.status === 'False',
    );
    expect(condition(found, 'Ready')?.status).toBe('True');
    expect(await world.replicas(namespace, 'worker-audio')).toBe(2);
    expect(reconciles).toBeGreaterThan(0);
  });
});
