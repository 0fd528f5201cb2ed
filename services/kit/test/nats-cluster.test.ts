import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { createTopology } from '@tamp/proto';
import { launchInfrastructure, type RunningInfrastructure } from '@tamp/scripts/infra/launcher';
import { provisionTools } from '@tamp/scripts/infra/provision';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  connectNats,
  type NatsConnection,
  provisionTopology,
  raiseReplicasAsClusterGrows,
  streamReplicasFor,
} from '../src/nats';

/**
 * Against a real three-node NATS cluster of its own (three nats-server processes on loopback,
 * routed, JetStream on each): what `auto` resolves to there, and streams made with
 * one replica (a deployment that grew from one server) brought to three on the next start.
 */
let dataDir: string;
let cluster: RunningInfrastructure;
let nats: NatsConnection;
const topology = createTopology('grow');

beforeAll(async () => {
  await provisionTools('nats-server');
  dataDir = await mkdtemp(join(tmpdir(), 'tamp-nats-cluster-'));
  // Only NATS is started: servers named in `env` are taken as given and never contacted here.
  cluster = await launchInfrastructure({
    dataDir,
    env: { MONGO_URL: 'mongodb://unused/', S3_ENDPOINT: 'http://unused/' },
    natsNodes: 3,
  });
  nats = await connectNats({
    url: cluster.natsUrl,
    name: 'kit-cluster-test',
    logger: pino({ level: 'silent' }),
  });
}, 120_000);

afterAll(async () => {
  await nats?.close();
  await cluster?.stop();
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
});

describe('streams on a three-node NATS cluster', () => {
  it('resolves auto to three replicas from what the server advertises', () => {
    expect(nats.info?.cluster).toBe('tamp');
    expect(streamReplicasFor('auto', nats.info)).toEqual({ atLeast: 3 });
  });

  it('brings every stream made with one replica to three, its consumers kept', async () => {
    const manager = await jetstreamManager(nats);
    await provisionTopology(nats, topology, 1);
    const jobs = topology.streams.jobs.name;
    expect((await manager.streams.info(jobs)).config.num_replicas).toBe(1);

    await provisionTopology(nats, topology, 3);
    for (const stream of Object.values(topology.streams)) {
      const info = await manager.streams.info(stream.name);
      expect(info.config.num_replicas, stream.name).toBe(3);
    }
    // A copy of every stream and consumer on every node: the leader and its replicas (all three
    // replicas while a group is still electing its leader). nats-server 2.15 adds the new copies
    // after answering the update, stream by stream (measured: 1 s for EVENTS, 10 s for JOBS and
    // its consumers), where 2.9 listed them at once.
    const copiesOf = (info: { cluster?: { leader?: string; replicas?: { name: string }[] } }) =>
      new Set(
        [info.cluster?.leader, ...(info.cluster?.replicas ?? []).map((r) => r.name)].filter(
          Boolean,
        ),
      );
    const everyNode = new Set(['nats', 'nats-2', 'nats-3']);
    await vi.waitFor(
      async () => {
        for (const stream of Object.values(topology.streams)) {
          expect(copiesOf(await manager.streams.info(stream.name)), stream.name).toEqual(everyNode);
        }
        for (const consumer of Object.values(topology.consumers)) {
          const info = await manager.consumers.info(consumer.stream, consumer.durableName);
          expect(copiesOf(info), consumer.durableName).toEqual(everyNode);
        }
      },
      { timeout: 30_000, interval: 250 },
    );
    for (const consumer of Object.values(topology.consumers)) {
      const info = await manager.consumers.info(consumer.stream, consumer.durableName);
      expect(info.config.filter_subject).toBe(consumer.filterSubject);
    }
  });

  it('keeps three copies through a start with a node down, and raises new streams when it is back', async () => {
    await provisionTopology(nats, topology, 3);
    const third = cluster.servers['nats-3'];
    if (third === undefined) throw new Error('no third node');
    await third.stop();
    // A service starting now: the nodes it reaches advertise two members, so auto means one.
    const late = await connectNats({
      url: cluster.natsUrl,
      name: 'kit-cluster-test-late',
      logger: pino({ level: 'silent' }),
    });
    try {
      const manager = await jetstreamManager(late);
      await vi.waitFor(() => expect(streamReplicasFor('auto', late.info)).toEqual({ atLeast: 1 }), {
        timeout: 15_000,
      });
      const started = streamReplicasFor('auto', late.info);
      await provisionTopology(late, topology, started);
      for (const stream of Object.values(topology.streams)) {
        const info = await manager.streams.info(stream.name);
        expect(info.config.num_replicas, stream.name).toBe(3);
      }
      // Streams new to this start get one copy, and three once the cluster is whole again.
      const fresh = createTopology('late');
      await provisionTopology(late, fresh, started);
      expect((await manager.streams.info(fresh.streams.jobs.name)).config.num_replicas).toBe(1);
      const raising = raiseReplicasAsClusterGrows(
        late,
        fresh,
        started,
        pino({ level: 'silent' }),
        250,
      );
      await third.restart();
      await vi.waitFor(
        async () => {
          for (const stream of Object.values(fresh.streams)) {
            const info = await manager.streams.info(stream.name);
            expect(info.config.num_replicas, stream.name).toBe(3);
          }
        },
        { timeout: 30_000, interval: 250 },
      );
      await late.close();
      await raising;
    } finally {
      if (!late.isClosed()) await late.close();
    }
  });
});
