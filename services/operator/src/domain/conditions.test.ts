import { describe, expect, it } from 'vitest';
import { becameTrue, setCondition } from './conditions';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const t1 = new Date('2026-01-01T00:01:00.000Z');
const ready = (status: 'True' | 'False', reason: string) => ({
  type: 'Ready' as const,
  status,
  reason,
  message: reason,
  observedGeneration: 1,
});

describe('setCondition', () => {
  it('moves lastTransitionTime only when the status changes', () => {
    const first = setCondition([], ready('False', 'DeploymentMissing'), t0);
    expect(first[0]!.lastTransitionTime).toBe(t0.toISOString());
    const sameStatus = setCondition(first, ready('False', 'BacklogUnavailable'), t1);
    expect(sameStatus).toHaveLength(1);
    expect(sameStatus[0]).toMatchObject({ reason: 'BacklogUnavailable' });
    expect(sameStatus[0]!.lastTransitionTime).toBe(t0.toISOString());
    const changed = setCondition(sameStatus, ready('True', 'FollowingBacklog'), t1);
    expect(changed[0]!.lastTransitionTime).toBe(t1.toISOString());
  });

  it('tells when a condition became true', () => {
    const before = setCondition([], ready('False', 'X'), t0);
    const after = setCondition(before, ready('True', 'Y'), t1);
    expect(becameTrue(before, after, 'Ready')).toBe(true);
    expect(becameTrue(after, after, 'Ready')).toBe(false);
    expect(becameTrue(undefined, before, 'Ready')).toBe(false);
  });
});
