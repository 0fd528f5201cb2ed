import { jetstreamManager } from '@nats-io/jetstream';
import { createTopology } from '@tamp/proto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import { connectNats, type NatsConnection, provisionTopology } from '../src/nats';

const infrastructure = isolatedInfrastructure();
const topology = createTopology(infrastructure.namespace);
let nats: NatsConnection;

beforeAll(async () => {
  nats = await connectNats({
    url: infrastructure.natsUrl,
    name: 'kit-test',
    logger: pino({ level: 'silent' }),
  });
});
afterAll(async () => {
  const manager = await jetstreamManager(nats);
  for (const stream of Object.values(topology.streams)) await manager.streams.delete(stream.name);
  await nats.close();
});

describe('NATS provisioning', () => {
  it('creates every stream and consumer of the topology, and a second run changes nothing', async () => {
    await provisionTopology(nats, topology, 1);
    await provisionTopology(nats, topology, 1);

    const manager = await jetstreamManager(nats);
    const jobs = await manager.streams.info(topology.streams.jobs.name);
    expect(jobs.config.retention).toBe('workqueue');
    expect(jobs.config.subjects).toEqual(topology.streams.jobs.subjects);
    expect(jobs.config.duplicate_window).toBe(topology.streams.jobs.duplicateWindowMs * 1_000_000);
    const events = await manager.streams.info(topology.streams.events.name);
    expect(events.config.retention).toBe('limits');
    const counts = await manager.streams.info(topology.streams.requestCounts.name);
    expect(counts.config.allow_msg_counter).toBe(true);
    expect(counts.config.max_msgs_per_subject).toBe(1);
    expect(events.config.allow_msg_counter ?? false).toBe(false);
    expect(events.config.max_msgs_per_subject).toBe(-1);

    for (const consumer of Object.values(topology.consumers)) {
      const info = await manager.consumers.info(consumer.stream, consumer.durableName);
      expect(info.config.ack_policy).toBe('explicit');
      expect(info.config.filter_subject).toBe(consumer.filterSubject);
      expect(info.config.ack_wait).toBe(consumer.ackWaitMs * 1_000_000);
    }
    const consumerNames: string[] = [];
    for await (const page of manager.consumers.list(topology.streams.jobs.name))
      consumerNames.push(page.name);
    expect(consumerNames.sort()).toEqual(['worker-audio', 'worker-image', 'worker-text']);
  });

  it('sends no update when the server already holds the definition', async () => {
    await provisionTopology(nats, topology, 1);
    // Every JetStream API request of the provisioning, as the server receives it.
    const requests: string[] = [];
    const watcher = await connectNats({
      url: infrastructure.natsUrl,
      name: 'kit-test-watcher',
      logger: pino({ level: 'silent' }),
    });
    const subscription = watcher.subscribe('$JS.API.>', {
      callback: (_error, message) => {
        requests.push(message.subject);
      },
    });
    await watcher.flush();
    await provisionTopology(nats, topology, 1);
    await nats.flush();
    await watcher.flush();
    subscription.unsubscribe();
    await watcher.close();
    expect(requests.filter((subject) => subject.includes('.INFO.')).length).toBeGreaterThan(0);
    expect(requests.filter((subject) => /\.(UPDATE|CREATE)\./.test(subject))).toEqual([]);
  });

  it('brings a drifted consumer back to its definition', async () => {
    await provisionTopology(nats, topology, 1);
    const manager = await jetstreamManager(nats);
    const audio = topology.consumers['worker-audio'];
    await manager.consumers.update(audio.stream, audio.durableName, { ack_wait: 5_000_000_000 });
    await provisionTopology(nats, topology, 1);
    const info = await manager.consumers.info(audio.stream, audio.durableName);
    expect(info.config.ack_wait).toBe(audio.ackWaitMs * 1_000_000);
  });

  it('stores a job published twice with the same message id once', async () => {
    await provisionTopology(nats, topology, 1);
    const { jetstream } = await import('@nats-io/jetstream');
    const js = jetstream(nats);
    const first = await js.publish(topology.subjects.jobs.text, '{}', { msgID: 'job_dedup' });
    const second = await js.publish(topology.subjects.jobs.text, '{}', { msgID: 'job_dedup' });
    expect(first.duplicate).toBe(false);
    expect(second.duplicate).toBe(true);
    expect(second.seq).toBe(first.seq);
  });

  it('keeps namespaces apart: subjects and streams carry the prefix', () => {
    const other = createTopology('other');
    expect(other.streams.jobs.name).toBe('OTHER_JOBS');
    expect(other.subjects.jobs.audio).toBe('other.jobs.audio');
    expect(createTopology('').subjects.events.completed).toBe('events.job.completed');
    expect(() => createTopology('Bad.Namespace')).toThrow(/namespace/);
  });
});
