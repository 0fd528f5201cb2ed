import { describe, expect, it } from 'vitest';
import { replicaCountFor, streamReplicasFor } from './nats';

const member = (port: number) => `127.0.0.1:${port}`;

describe('streamReplicasFor', () => {
  it('gives a server alone one replica under auto', () => {
    expect(streamReplicasFor('auto', { connect_urls: [] })).toEqual({ atLeast: 1 });
    expect(streamReplicasFor('auto', undefined)).toEqual({ atLeast: 1 });
  });

  it('gives three replicas on a cluster advertising three or more members', () => {
    const three = [member(1), member(2), member(3)];
    expect(streamReplicasFor('auto', { cluster: 'tamp', connect_urls: three })).toEqual({
      atLeast: 3,
    });
    expect(
      streamReplicasFor('auto', {
        cluster: 'tamp',
        connect_urls: [...three, member(4), member(5)],
      }),
    ).toEqual({ atLeast: 3 });
  });

  it('stays at one on a cluster of two, or one that hides its members', () => {
    expect(
      streamReplicasFor('auto', { cluster: 'tamp', connect_urls: [member(1), member(2)] }),
    ).toEqual({ atLeast: 1 });
    expect(streamReplicasFor('auto', { cluster: 'tamp' })).toEqual({ atLeast: 1 });
    // The same member advertised twice is still one member.
    expect(
      streamReplicasFor('auto', {
        cluster: 'tamp',
        connect_urls: [member(1), member(1), member(2)],
      }),
    ).toEqual({ atLeast: 1 });
  });

  it('takes a number as it is, whatever the server says', () => {
    expect(streamReplicasFor(2, { cluster: 'tamp', connect_urls: [member(1)] })).toBe(2);
    expect(
      streamReplicasFor(1, { cluster: 'tamp', connect_urls: [member(1), member(2), member(3)] }),
    ).toBe(1);
  });
});

describe('replicaCountFor', () => {
  it('gives a number exactly, scaling an existing stream up or down to it', () => {
    expect(replicaCountFor(3)).toBe(3);
    expect(replicaCountFor(1, 3)).toBe(1);
    expect(replicaCountFor(3, 1)).toBe(3);
  });

  it('under auto raises an existing stream with fewer copies and keeps one with more', () => {
    expect(replicaCountFor({ atLeast: 3 })).toBe(3);
    expect(replicaCountFor({ atLeast: 3 }, 1)).toBe(3);
    // One node of three down at a restart: the server reached advertises two members.
    expect(replicaCountFor({ atLeast: 1 }, 3)).toBe(3);
    expect(replicaCountFor({ atLeast: 1 })).toBe(1);
  });
});
