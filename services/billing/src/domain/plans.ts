import { MB, PLANS, type Plan } from '@tamp/proto';
import { z } from 'zod';

/** What a plan grants. Configuration, not code: `PLANS_JSON` may override any of it. */
export const planLimits = z.object({
  maxUploadBytes: z.number().int().positive(),
  /** Allowance granted at every period start; unused allowance does not carry over. */
  creditsPerPeriod: z.number().int().nonnegative(),
  rateLimitPerMinute: z.number().int().positive(),
});
export type PlanLimits = z.infer<typeof planLimits>;
export type PlanCatalog = Record<Plan, PlanLimits>;

export const DEFAULT_PLANS: PlanCatalog = {
  free: { maxUploadBytes: 25 * MB, creditsPerPeriod: 100, rateLimitPerMinute: 60 },
  pro: { maxUploadBytes: 100 * MB, creditsPerPeriod: 10_000, rateLimitPerMinute: 600 },
};

/** `PLANS_JSON`: per plan, any subset of the limits; what is not given keeps its default. */
export const planOverrides = z.strictObject(
  Object.fromEntries(PLANS.map((plan) => [plan, planLimits.partial().optional()])) as Record<
    Plan,
    z.ZodOptional<ReturnType<typeof planLimits.partial>>
  >,
);
export type PlanOverrides = z.infer<typeof planOverrides>;

export function planCatalog(overrides: PlanOverrides = {}): PlanCatalog {
  const catalog = { ...DEFAULT_PLANS };
  for (const plan of PLANS) catalog[plan] = { ...DEFAULT_PLANS[plan], ...overrides[plan] };
  return catalog;
}
