import { createTopology, ServiceError } from '@tamp/proto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import { assertStaysTrue } from '../../../test/support/stays-true';
import { connectNats, type NatsConnection } from '../src/nats';
import {
  DEFAULT_RPC_TIMING,
  EndpointGroup,
  Rpc,
  type RpcTiming,
  UndeliveredCallError,
} from '../src/rpc';
import { divide } from './support/divide-endpoint';

const infrastructure = isolatedInfrastructure();
const logger = pino({ level: 'silent' });
let server: NatsConnection;
let client: NatsConnection;
let rpc: Rpc;

beforeAll(async () => {
  const topology = createTopology(infrastructure.namespace);
  server = await connectNats({ url: infrastructure.natsUrl, name: 'server', logger });
  client = await connectNats({ url: infrastructure.natsUrl, name: 'client', logger });
  new Rpc(server, topology, logger).serve(divide, async ({ a, b }) => {
    if (b === 0)
      throw new ServiceError('VALIDATION_ERROR', 'b must not be 0', [
        { path: 'b', message: 'zero' },
      ]);
    if (a < 0) throw new Error('secret internal detail');
    if (a === 13) {
      // What the MongoDB driver throws while the database is paused.
      throw Object.assign(new Error('connection timed out'), { name: 'MongoNetworkTimeoutError' });
    }
    return { quotient: a / b };
  });
  await server.flush();
  rpc = new Rpc(client, topology, logger);
});
afterAll(async () => {
  await Promise.all([server.close(), client.close()]);
});

describe('Rpc over real NATS', () => {
  it('calls a served endpoint', async () => {
    expect(await rpc.call(divide, { a: 9, b: 3 })).toEqual({ quotient: 3 });
  });

  it('carries a ServiceError across with its code and details', async () => {
    const error = await rpc.call(divide, { a: 1, b: 0 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).code).toBe('VALIDATION_ERROR');
    expect((error as ServiceError).details).toEqual([{ path: 'b', message: 'zero' }]);
  });

  it("answers a dependency's outage as UNAVAILABLE, which callers retry", async () => {
    const error = (await rpc
      .call(divide, { a: 13, b: 1 })
      .catch((caught: unknown) => caught)) as ServiceError;
    expect(error.code).toBe('UNAVAILABLE');
  });

  it('refuses work whose caller has given up, and shortens the wait to the deadline', async () => {
    const late = (await rpc
      .call(divide, { a: 1, b: 1 }, { deadline: Date.now() - 1 })
      .catch((caught: unknown) => caught)) as ServiceError;
    expect(late.code).toBe('UNAVAILABLE');
    expect(await rpc.call(divide, { a: 8, b: 2 }, { deadline: Date.now() + 5_000 })).toEqual({
      quotient: 4,
    });
  });

  it('hides unexpected errors behind INTERNAL', async () => {
    const error = (await rpc
      .call(divide, { a: -1, b: 1 })
      .catch((caught: unknown) => caught)) as ServiceError;
    expect(error.code).toBe('INTERNAL');
    expect(error.message).not.toContain('secret');
  });

  it('rejects a request that does not match the schema on the serving side', async () => {
    const loose = { ...divide, request: z.object({ a: z.unknown(), b: z.unknown() }) };
    const error = (await rpc
      .call(loose, { a: 'nine', b: 3 })
      .catch((caught: unknown) => caught)) as ServiceError;
    expect(error.code).toBe('VALIDATION_ERROR');
  });

  it('reports a service nobody serves as UNAVAILABLE instead of hanging, and as undelivered', async () => {
    const missing = { ...divide, service: 'nobody' };
    const error = (await rpc
      .call(missing, { a: 1, b: 1 }, { timeoutMs: 500 })
      .catch((caught: unknown) => caught)) as ServiceError;
    expect(error.code).toBe('UNAVAILABLE');
    expect(error).toBeInstanceOf(UndeliveredCallError);
  });

  it('sends a request that reached nobody again while its service comes back', async () => {
    const topology = createTopology(infrastructure.namespace);
    const returning = { ...divide, service: 'returning' };
    let served: EndpointGroup | undefined;
    // What a drained NATS pod does to a service for about a second: its subscription is gone
    // until its client has reconnected to another server.
    const back = setTimeout(() => {
      served = new EndpointGroup(new Rpc(server, topology, logger)).serve(
        returning,
        async ({ a, b }) => ({ quotient: a / b }),
      );
    }, 300);
    const answer = await new Rpc(client, topology, logger, {
      ...DEFAULT_RPC_TIMING,
      noRespondersGraceMs: 10_000,
    })
      .call(returning, { a: 8, b: 4 }, { timeoutMs: 20_000 })
      .finally(() => clearTimeout(back));
    await served?.stop();
    expect(answer).toEqual({ quotient: 2 });
  });

  describe('a responder that died with the request', () => {
    const timing: RpcTiming = { heartbeatMs: 50, silenceMs: 400, noRespondersGraceMs: 400 };

    it('is UNAVAILABLE once silent, long before the time-out', async () => {
      const topology = createTopology(infrastructure.namespace);
      const swallowed = { ...divide, service: 'swallowed' };
      // What a SIGKILLed service leaves on the NATS server for a moment: a subscription in its
      // queue group that takes a request and never answers it.
      const dead = server.subscribe(topology.subjects.service('swallowed', 'divide'), {
        queue: 'swallowed',
      });
      await server.flush();
      const error = (await new Rpc(client, topology, logger, timing)
        .call(swallowed, { a: 1, b: 1 }, { timeoutMs: 120_000 })
        .catch((caught: unknown) => caught)) as ServiceError;
      dead.unsubscribe();
      expect(error.code).toBe('UNAVAILABLE');
      expect(error.message).toBe('The swallowed service stopped answering; retry shortly');
      // It may have acted on the request: not the answer of a request nobody received.
      expect(error).not.toBeInstanceOf(UndeliveredCallError);
    });

    it('is told apart from a responder still at work, which is waited for', async () => {
      const topology = createTopology(infrastructure.namespace);
      const patient = { ...divide, service: 'patient' };
      const group = await new EndpointGroup(new Rpc(server, topology, logger))
        .serve(patient, async ({ a, b }) => {
          await new Promise((resolve) => setTimeout(resolve, timing.silenceMs * 4));
          return { quotient: a / b };
        })
        .ready();
      const answer = await new Rpc(client, topology, logger, timing).call(patient, { a: 6, b: 3 });
      await group.stop();
      expect(answer).toEqual({ quotient: 2 });
    });
  });

  it('stops an endpoint group only once the requests under way are answered', async () => {
    const slow = { ...divide, service: 'slow' };
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let arrived!: () => void;
    const underWay = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const serverRpc = new Rpc(server, createTopology(infrastructure.namespace), logger);
    const group = await new EndpointGroup(serverRpc)
      .serve(slow, async ({ a, b }) => {
        arrived();
        await released;
        return { quotient: a / b };
      })
      .ready();
    const answer = rpc.call(slow, { a: 6, b: 2 });
    await underWay;
    let stopped = false;
    const stopping = group.stop().then(() => {
      stopped = true;
    });
    // The stop must not finish while the request is under way; nothing announces that it has
    // not, so it is watched for 100 ms (a stop that did not wait would be done in a tick).
    await assertStaysTrue(() => stopped === false, { forMs: 100, what: 'the stop waiting' });
    release();
    await stopping;
    expect(await answer).toEqual({ quotient: 3 });
  });
});
