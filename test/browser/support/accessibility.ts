import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { AxeResults, RunOptions } from 'axe-core';
import type { Page } from 'playwright-core';

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/** The rules checked: WCAG 2.0 and 2.1, levels A and AA. */
export const WCAG_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];

export interface AccessibilityViolation {
  /** axe's rule id, e.g. `label`, `color-contrast`. */
  id: string;
  impact: 'serious' | 'critical';
  help: string;
  helpUrl: string;
  nodes: Array<{ target: string; html: string; failureSummary: string }>;
}

/**
 * Runs axe-core on the page as it is now and returns the WCAG 2.1 A/AA violations of impact
 * serious or critical (an empty list means none). axe's source goes in through `page.evaluate`,
 * which reaches the page over the DevTools protocol and so works under a strict CSP
 * (`script-src 'self'`, no 'unsafe-eval'), where `page.addScriptTag` is refused; harness.test.ts
 * checks both. `include` limits the check to the elements matching a CSS selector.
 */
export async function checkAccessibility(
  page: Page,
  options: { include?: string } = {},
): Promise<AccessibilityViolation[]> {
  const hasAxe = await page.evaluate(() => 'axe' in globalThis);
  if (!hasAxe) await page.evaluate(AXE_SOURCE);
  const runOptions: RunOptions = {
    runOnly: { type: 'tag', values: WCAG_TAGS },
    resultTypes: ['violations'],
  };
  const violations = await page.evaluate(
    async ({ include, runOptions }) => {
      const scope = globalThis as unknown as {
        axe: { run(context: unknown, options: unknown): Promise<AxeResults> };
        document: unknown;
      };
      const results = await scope.axe.run(include ?? scope.document, runOptions);
      return results.violations.map((violation) => ({
        id: violation.id,
        impact: violation.impact ?? null,
        help: violation.help,
        helpUrl: violation.helpUrl,
        nodes: violation.nodes.map((node) => ({
          target: node.target.join(' '),
          html: node.html,
          failureSummary: node.failureSummary ?? '',
        })),
      }));
    },
    { include: options.include, runOptions },
  );
  return violations.filter(
    (violation): violation is AccessibilityViolation =>
      violation.impact === 'serious' || violation.impact === 'critical',
  );
}
