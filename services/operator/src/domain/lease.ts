/** The fields of a coordination.k8s.io/v1 Lease that leader election reads and writes. */
export interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: string;
  renewTime: string;
  leaseTransitions: number;
}

/** The last record seen and when this process saw it change, by its own clock. */
export interface LeaseObservation {
  record: LeaseRecord;
  observedAtMs: number;
}

/**
 * Whether another holder's lease is still valid. Counted from when this process saw the record
 * last change, by its own clock, never from the renewTime written by another node's clock:
 * clock skew between nodes then cannot make two processes leaders at once (client-go's rule).
 * An empty holder is a released lease: free at once.
 */
export function heldByAnother(
  observation: LeaseObservation,
  identity: string,
  nowMs: number,
): boolean {
  const { record, observedAtMs } = observation;
  if (record.holderIdentity === '' || record.holderIdentity === identity) return false;
  return observedAtMs + record.leaseDurationSeconds * 1000 > nowMs;
}

/** Remembers when the record last changed; an unchanged record keeps its first sighting. */
export function observe(
  previous: LeaseObservation | undefined,
  record: LeaseRecord,
  nowMs: number,
): LeaseObservation {
  return previous !== undefined && sameRecord(previous.record, record)
    ? previous
    : { record, observedAtMs: nowMs };
}

/** The record that acquires (counting a transition) or renews the lease for `identity`. */
export function claim(
  current: LeaseRecord | undefined,
  identity: string,
  leaseDurationSeconds: number,
  now: Date,
): LeaseRecord {
  const renewing = current?.holderIdentity === identity;
  return {
    holderIdentity: identity,
    leaseDurationSeconds,
    acquireTime: renewing ? current!.acquireTime : now.toISOString(),
    renewTime: now.toISOString(),
    leaseTransitions: renewing
      ? current!.leaseTransitions
      : current === undefined
        ? 0
        : current.leaseTransitions + 1,
  };
}

/** A released lease: no holder, so a waiting candidate takes it on its next try. */
export function release(current: LeaseRecord, now: Date): LeaseRecord {
  return {
    ...current,
    holderIdentity: '',
    leaseDurationSeconds: 1,
    renewTime: now.toISOString(),
  };
}

function sameRecord(a: LeaseRecord, b: LeaseRecord): boolean {
  return (
    a.holderIdentity === b.holderIdentity &&
    a.renewTime === b.renewTime &&
    a.acquireTime === b.acquireTime &&
    a.leaseDurationSeconds === b.leaseDurationSeconds &&
    a.leaseTransitions === b.leaseTransitions
  );
}
