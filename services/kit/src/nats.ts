import { setTimeout as delay } from 'node:timers/promises';
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import { type NatsConnection, nanos } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import type { ConsumerDefinition, StreamDefinition, Topology } from '@tamp/proto';
import type { Logger } from 'pino';

export type { NatsConnection };

export async function connectNats(options: {
  url: string;
  name: string;
  logger: Logger;
}): Promise<NatsConnection> {
  const connection = await connect({
    servers: options.url.split(','),
    name: options.name,
    // Keep trying through broker restarts; readiness reports the gap meanwhile.
    maxReconnectAttempts: -1,
    reconnectTimeWait: 1_000,
    // A server that stopped answering (a dead node, a partition) is given up on in ~30 s and
    // reconnected to, rather than after the default four minutes.
    pingInterval: 10_000,
    maxPingOut: 3,
    // nats.js otherwise builds an Error per request and per publish to JetStream, only to give
    // a time-out the caller's stack: measurable per job, and every Rpc error says its subject.
    noAsyncTraces: true,
  });
  void (async () => {
    for await (const status of connection.status()) {
      if (status.type === 'disconnect' || status.type === 'error') {
        options.logger.warn({ nats: status.type }, 'NATS connection problem');
      } else if (status.type === 'reconnect') {
        options.logger.info('NATS reconnected');
      }
    }
  })();
  return connection;
}

/** `auto`, or a fixed number of replicas for every stream and bucket (kit's NATS_STREAM_REPLICAS). */
export type StreamReplicasSetting = 'auto' | number;

/** A cluster this size or larger gets three replicas under `auto`: one node may then be lost. */
const REPLICATED_CLUSTER_SIZE = 3;

/**
 * Copies of every stream and bucket: a number is exact (an existing stream is scaled up or down
 * to it); `atLeast` raises an existing stream with fewer copies and keeps one with more. `auto`
 * is a floor because a server counts only the members it reaches: a service restarting while
 * one node of three is down, exactly the loss the copies are for, must not scale every stream
 * down to one.
 */
export type StreamReplicas = number | { atLeast: number };

/**
 * What `setting` means on the server a connection reached. A clustered server names its
 * cluster and advertises every member's client URLs (its own included) in the INFO it sends
 * each client; a server alone, or a cluster hiding its members, counts as one.
 */
export function streamReplicasFor(
  setting: StreamReplicasSetting,
  server: { cluster?: string; connect_urls?: string[] } | undefined,
): StreamReplicas {
  if (setting !== 'auto') return setting;
  if (server?.cluster === undefined) return { atLeast: 1 };
  const members = new Set(server.connect_urls ?? []).size;
  return { atLeast: members >= REPLICATED_CLUSTER_SIZE ? REPLICATED_CLUSTER_SIZE : 1 };
}

/** The copies a stream or bucket holding `existing` copies (none: a new one) is given. */
export function replicaCountFor(replicas: StreamReplicas, existing?: number): number {
  if (typeof replicas === 'number') return replicas;
  return Math.max(replicas.atLeast, existing ?? 0);
}

/**
 * Under `auto`, raises the topology's streams when the server reached advertises more cluster
 * members than on start: a service started while the cluster was still forming, two nodes of
 * three routed (enough to elect a JetStream leader), would otherwise keep one copy until its
 * next start. The server pushes its member list to the client, which keeps it in `info`; this
 * reads that field every `everyMs` (no request) and ends once the streams have the most `auto`
 * gives, or the connection closes. nats.js's `update` status is not enough: it reports only
 * servers the client did not know yet, and a URL list naming every node knows them all.
 */
export async function raiseReplicasAsClusterGrows(
  connection: NatsConnection,
  topology: Topology,
  started: StreamReplicas,
  logger: Logger,
  everyMs = 10_000,
): Promise<void> {
  let floor = replicaCountFor(started);
  const closed = connection.closed();
  while (floor < REPLICATED_CLUSTER_SIZE && !connection.isClosed()) {
    await Promise.race([delay(everyMs, undefined, { ref: false }), closed]);
    const grown = replicaCountFor(streamReplicasFor('auto', connection.info));
    if (grown <= floor || connection.isClosed()) continue;
    logger.info({ streamReplicas: grown }, 'the NATS cluster grew: raising stream replicas');
    try {
      await provisionTopology(connection, topology, { atLeast: grown });
      floor = grown;
    } catch (error) {
      logger.warn({ err: error }, 'raising stream replicas failed; trying again');
    }
  }
}

/**
 * Creates or updates every stream and consumer of the topology, each stream with `replicas`
 * copies (an existing one is scaled to it; its consumers follow); safe to run on every start.
 */
export async function provisionTopology(
  connection: NatsConnection,
  topology: Topology,
  replicas: StreamReplicas,
): Promise<void> {
  const manager = await jetstreamManager(connection);
  for (const stream of Object.values(topology.streams)) {
    await ensureStream(manager, stream, replicas);
  }
  for (const consumer of Object.values(topology.consumers)) await ensureConsumer(manager, consumer);
}

async function ensureStream(
  manager: JetStreamManager,
  stream: StreamDefinition,
  replicas: StreamReplicas,
): Promise<void> {
  const found = await lookUp(
    () => manager.streams.info(stream.name),
    JetStreamApiCodes.StreamNotFound,
  );
  const config = {
    subjects: stream.subjects,
    max_age: nanos(stream.maxAgeMs),
    duplicate_window: nanos(stream.duplicateWindowMs),
    discard: DiscardPolicy.Old,
    num_replicas: replicaCountFor(replicas, found?.config.num_replicas),
    ...(stream.counter === true && { allow_msg_counter: true }),
    ...(stream.maxMessagesPerSubject !== undefined && {
      max_msgs_per_subject: stream.maxMessagesPerSubject,
    }),
  };
  if (found !== undefined) {
    if (differs(found.config, config)) await manager.streams.update(stream.name, config);
    return;
  }
  await manager.streams.add({
    ...config,
    name: stream.name,
    retention:
      stream.retention === 'workqueue' ? RetentionPolicy.Workqueue : RetentionPolicy.Limits,
    storage: StorageType.File,
  });
}

async function ensureConsumer(
  manager: JetStreamManager,
  consumer: ConsumerDefinition,
): Promise<void> {
  const mutable = {
    ack_wait: nanos(consumer.ackWaitMs),
    max_deliver: consumer.maxDeliver,
    max_ack_pending: consumer.maxAckPending,
  };
  const found = await lookUp(
    () => manager.consumers.info(consumer.stream, consumer.durableName),
    JetStreamApiCodes.ConsumerNotFound,
  );
  if (found !== undefined) {
    if (differs(found.config, mutable)) {
      await manager.consumers.update(consumer.stream, consumer.durableName, mutable);
    }
    return;
  }
  await manager.consumers.add(consumer.stream, {
    ...mutable,
    durable_name: consumer.durableName,
    filter_subject: consumer.filterSubject,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
  });
}

async function lookUp<Info>(
  lookup: () => Promise<Info>,
  notFoundCode: number,
): Promise<Info | undefined> {
  try {
    return await lookup();
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === notFoundCode) return undefined;
    throw error;
  }
}

/**
 * Whether the server's configuration differs from the desired one in a field this sets. Every
 * process of every service provisions on start: an update that changes nothing is still a
 * proposal through the stream's or consumer's consensus group, which a group still recovering
 * from a lost peer may leave unanswered, failing the start of a service that needed no change.
 */
function differs(current: object, desired: Record<string, unknown>): boolean {
  const observed = current as Record<string, unknown>;
  return Object.entries(desired).some(
    ([key, value]) => JSON.stringify(observed[key]) !== JSON.stringify(value),
  );
}
