import type { Condition, ConditionType } from './worker-pool';

export type ConditionUpdate = Omit<Condition, 'lastTransitionTime'>;

/**
 * Sets one condition the way the API conventions ask: lastTransitionTime moves only when the
 * status changes, so it says since when the condition has held; reason and message follow.
 */
export function setCondition(
  conditions: readonly Condition[],
  update: ConditionUpdate,
  now: Date,
): Condition[] {
  const previous = conditions.find((condition) => condition.type === update.type);
  const lastTransitionTime =
    previous !== undefined && previous.status === update.status
      ? previous.lastTransitionTime
      : now.toISOString();
  const next = { ...update, lastTransitionTime };
  return previous === undefined
    ? [...conditions, next]
    : conditions.map((condition) => (condition.type === update.type ? next : condition));
}

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: ConditionType,
): Condition | undefined {
  return conditions?.find((condition) => condition.type === type);
}

/** True when `type` is True now but was not before: the moment to tell users (an Event). */
export function becameTrue(
  before: readonly Condition[] | undefined,
  after: readonly Condition[],
  type: ConditionType,
): boolean {
  return (
    findCondition(after, type)?.status === 'True' && findCondition(before, type)?.status !== 'True'
  );
}
