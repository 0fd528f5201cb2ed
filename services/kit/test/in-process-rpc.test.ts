import { createTopology, ServiceError } from '@tamp/proto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import { InProcessResponders } from '../src/in-process-responders';
import { connectNats, type NatsConnection } from '../src/nats';
import { DEFAULT_RPC_TIMING, EndpointGroup, Rpc, UndeliveredCallError } from '../src/rpc';
import { divide } from './support/divide-endpoint';

const infrastructure = isolatedInfrastructure();
const logger = pino({ level: 'silent' });
const topology = createTopology(infrastructure.namespace);
/** Short enough that a call nobody serves gives up within the test. */
const timing = { ...DEFAULT_RPC_TIMING, noRespondersGraceMs: 300 };

// Two services of one process: connections of their own, one set of in-process responders.
const inProcess = new InProcessResponders();
let serverNats: NatsConnection;
let callerNats: NatsConnection;
let otherProcessNats: NatsConnection;
let caller: Rpc;
let endpoints: EndpointGroup;

beforeAll(async () => {
  const connect = (name: string) => connectNats({ url: infrastructure.natsUrl, name, logger });
  [serverNats, callerNats, otherProcessNats] = await Promise.all([
    connect('maths'),
    connect('caller'),
    connect('other-process'),
  ]);
  endpoints = await new EndpointGroup(new Rpc(serverNats, topology, logger, timing, inProcess))
    .serve(divide, async ({ a, b }, { deadline }) => {
      if (b === 0) throw new ServiceError('VALIDATION_ERROR', 'b must not be 0', [{ path: 'b' }]);
      if (a < 0) throw new Error('secret internal detail');
      if (a === 7) await new Promise((resolve) => setTimeout(resolve, 500));
      if (a === 1 && deadline === undefined) throw new Error('the deadline did not arrive');
      return { quotient: a / b };
    })
    .ready();
  caller = new Rpc(callerNats, topology, logger, timing, inProcess);
});
afterAll(async () => {
  await endpoints.stop();
  await Promise.all([serverNats.close(), callerNats.close(), otherProcessNats.close()]);
});

/** Messages either connection of the process sent or received over NATS meanwhile. */
async function natsMessagesDuring(action: () => Promise<unknown>): Promise<number> {
  const count = () =>
    [serverNats, callerNats].reduce(
      (sum, nats) => sum + nats.stats().inMsgs + nats.stats().outMsgs,
      0,
    );
  const before = count();
  await action();
  await Promise.all([serverNats.flush(), callerNats.flush()]);
  return count() - before;
}

describe('calls between services of one process', () => {
  it('answer in memory: no message crosses NATS', async () => {
    let answer: unknown;
    const messages = await natsMessagesDuring(async () => {
      answer = await caller.call(divide, { a: 9, b: 3 });
    });
    expect(answer).toEqual({ quotient: 3 });
    expect(messages).toBe(0);
  });

  it('keep the rules of a call over NATS: errors, validation, deadlines, time-outs', async () => {
    const invalid = { a: 'x' } as unknown as { a: number; b: number };
    await expect(caller.call(divide, { a: 1, b: 0 })).rejects.toMatchObject({
      code: 'VALIDATION_ERROR',
      details: [{ path: 'b' }],
    });
    await expect(caller.call(divide, { a: -1, b: 1 })).rejects.toMatchObject({
      code: 'INTERNAL',
      message: 'Internal error',
    });
    await expect(caller.call(divide, invalid)).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    // The deadline reaches the handler (which refuses a = 1 without one) in the headers.
    const deadline = Date.now() + 5_000;
    expect(await caller.call(divide, { a: 1, b: 1 }, { deadline })).toEqual({ quotient: 1 });
    await expect(caller.call(divide, { a: 7, b: 1 }, { timeoutMs: 100 })).rejects.toMatchObject({
      code: 'UNAVAILABLE',
    });
  });

  it('still reach the responder over NATS from another process', async () => {
    const remote = new Rpc(otherProcessNats, topology, logger, timing);
    expect(await remote.call(divide, { a: 6, b: 2 })).toEqual({ quotient: 3 });
  });

  it('go over NATS once the responder stopped, and find nobody there', async () => {
    const stopped = await new EndpointGroup(
      new Rpc(serverNats, topology, logger, timing, inProcess),
    )
      .serve({ ...divide, name: 'divide-once' }, async () => ({ quotient: 0 }))
      .ready();
    const once = { ...divide, name: 'divide-once' };
    expect(await caller.call(once, { a: 1, b: 1 })).toEqual({ quotient: 0 });
    await stopped.stop();
    const error = await caller.call(once, { a: 1, b: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UndeliveredCallError);
  });
});
