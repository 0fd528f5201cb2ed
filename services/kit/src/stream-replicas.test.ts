import { describe, expect, it } from 'vitest';
import { streamReplicasFor } from './nats';

const member = (port: number) => `127.0.0.1:${port}`;

describe('streamReplicasFor', () => {
  it('gives a server alone one replica under auto', () => {
    expect(streamReplicasFor('auto', { connect_urls: [] })).toBe(1);
    expect(streamReplicasFor('auto', undefined)).toBe(1);
  });

  it('gives three replicas on a cluster advertising three or more members', () => {
    const three = [member(1), member(2), member(3)];
    expect(streamReplicasFor('auto', { cluster: 'tamp', connect_urls: three })).toBe(3);
    expect(
      streamReplicasFor('auto', {
        cluster: 'tamp',
        connect_urls: [...three, member(4), member(5)],
      }),
    ).toBe(3);
  });

  it('stays at one on a cluster of two, or one that hides its members', () => {
    expect(
      streamReplicasFor('auto', { cluster: 'tamp', connect_urls: [member(1), member(2)] }),
    ).toBe(1);
    expect(streamReplicasFor('auto', { cluster: 'tamp' })).toBe(1);
    // The same member advertised twice is still one member.
    expect(
      streamReplicasFor('auto', {
        cluster: 'tamp',
        connect_urls: [member(1), member(1), member(2)],
      }),
    ).toBe(1);
  });

  it('takes a number as it is, whatever the server says', () => {
    expect(streamReplicasFor(2, { cluster: 'tamp', connect_urls: [member(1)] })).toBe(2);
    expect(
      streamReplicasFor(1, { cluster: 'tamp', connect_urls: [member(1), member(2), member(3)] }),
    ).toBe(1);
  });
});
