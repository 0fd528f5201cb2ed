import { describe, expect, it } from 'vitest';
import { isTampRuleId, planLifecycle, summarizeLifecycle } from './lifecycle-configuration';

const WANTED = [
  { id: 'tamp-expire-uploads', prefix: 'uploads/', days: 2 },
  { id: 'tamp-expire-results', prefix: 'results/', days: 8 },
];

const OPERATOR_RULE =
  '<Rule><ID>archive &amp; keep</ID><Filter><And><Prefix>0010</Prefix>' +
  '<Tag><Key>kind</Key><Value><![CDATA[a<b]]></Value></Tag></And></Filter>' +
  '<Status>Enabled</Status><Transition><Days>30</Days><StorageClass>GLACIER</StorageClass>' +
  '</Transition></Rule>';

/** Tamp's rules as S3 might return them: a prolog, whitespace, another element order. */
const TAMP_RULES_AS_RETURNED = `
  <Rule>
    <Expiration><Days>8</Days></Expiration>
    <ID>tamp-expire-results</ID>
    <Filter><Prefix>results/</Prefix></Filter>
    <Status>Enabled</Status>
  </Rule>
  <Rule><ID>tamp-expire-uploads</ID><Status>Enabled</Status><Filter><Prefix>uploads/</Prefix></Filter><Expiration><Days>2</Days></Expiration></Rule>`;

const configuration = (...rules: string[]) =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${rules.join('')}</LifecycleConfiguration>`;

describe('planLifecycle', () => {
  it("writes Tamp's rules to a bucket without a configuration", () => {
    const plan = planLifecycle(undefined, WANTED);
    expect(plan.action).toBe('put');
    expect(summarizeLifecycle(plan.action === 'put' ? plan.xml : undefined)).toEqual(WANTED);
  });

  it("writes nothing when Tamp's rules are already there, in any order and spelling", () => {
    expect(planLifecycle(configuration(OPERATOR_RULE, TAMP_RULES_AS_RETURNED), WANTED)).toEqual({
      action: 'none',
    });
    expect(planLifecycle(configuration(TAMP_RULES_AS_RETURNED), [...WANTED].reverse())).toEqual({
      action: 'none',
    });
    expect(planLifecycle(undefined, [])).toEqual({ action: 'none' });
  });

  it("keeps everyone else's rules byte for byte, in their place, before Tamp's", () => {
    const current = configuration(
      OPERATOR_RULE,
      TAMP_RULES_AS_RETURNED.replace('<Days>8<', '<Days>30<'),
    );
    const plan = planLifecycle(current, WANTED);
    if (plan.action !== 'put') throw new Error(`expected a put, got ${plan.action}`);
    expect(
      plan.xml.startsWith(
        `<LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${OPERATOR_RULE}<Rule><ID>tamp-expire-uploads</ID>`,
      ),
    ).toBe(true);
    expect(summarizeLifecycle(plan.xml)).toEqual([
      { id: 'archive & keep', prefix: '0010', days: 0 },
      ...WANTED,
    ]);
    // What was written is right on the next start.
    expect(planLifecycle(plan.xml, WANTED)).toEqual({ action: 'none' });
  });

  it("replaces Tamp's rules that differ in anything, extra elements included", () => {
    const disabled = TAMP_RULES_AS_RETURNED.replace(
      '<Status>Enabled</Status>',
      '<Status>Disabled</Status>',
    );
    const extra = TAMP_RULES_AS_RETURNED.replace(
      '</Rule>',
      '<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>',
    );
    const missing =
      '<Rule><ID>tamp-expire-uploads</ID><Status>Enabled</Status><Filter><Prefix>uploads/</Prefix></Filter><Expiration><Days>2</Days></Expiration></Rule>';
    for (const current of [disabled, extra, missing, `${TAMP_RULES_AS_RETURNED}${missing}`]) {
      const plan = planLifecycle(configuration(current), WANTED);
      expect(plan.action, current).toBe('put');
      if (plan.action === 'put') expect(summarizeLifecycle(plan.xml)).toEqual(WANTED);
    }
  });

  it('takes the rule IDs Tamp used before the prefix as its own', () => {
    const legacy =
      '<Rule><ID>expire-uploads</ID><Status>Enabled</Status><Filter><Prefix>uploads/</Prefix></Filter><Expiration><Days>2</Days></Expiration></Rule>' +
      '<Rule><ID>expire-logs</ID><Status>Enabled</Status><Filter><Prefix>logs/</Prefix></Filter><Expiration><Days>2</Days></Expiration></Rule>';
    const plan = planLifecycle(configuration(legacy), WANTED);
    if (plan.action !== 'put') throw new Error(`expected a put, got ${plan.action}`);
    expect(summarizeLifecycle(plan.xml).map((rule) => rule.id)).toEqual([
      'expire-logs',
      'tamp-expire-uploads',
      'tamp-expire-results',
    ]);
    expect(isTampRuleId('expire-uploads')).toBe(true);
    expect(isTampRuleId('expire-logs')).toBe(false);
    expect(isTampRuleId('tamp-anything')).toBe(true);
    expect(isTampRuleId('my-tamp-rule')).toBe(false);
  });

  it('removes the configuration when no rule is left, and only then', () => {
    expect(planLifecycle(configuration(TAMP_RULES_AS_RETURNED), [])).toEqual({ action: 'delete' });
    const plan = planLifecycle(configuration(OPERATOR_RULE, TAMP_RULES_AS_RETURNED), []);
    expect(plan).toEqual({
      action: 'put',
      xml: configuration(OPERATOR_RULE).replace(/^<\?xml[^>]*>\n/, ''),
    });
  });

  it('refuses a document it cannot read rather than guess', () => {
    for (const broken of ['<LifecycleConfiguration><Rule>', '<A></B>', 'text', '<A/><B/>']) {
      expect(() => planLifecycle(broken, WANTED), broken).toThrow(/unreadable bucket lifecycle/);
    }
  });

  it('escapes what it writes', () => {
    const plan = planLifecycle(undefined, [{ id: 'tamp-a&b', prefix: 'x<y/', days: 1 }]);
    if (plan.action !== 'put') throw new Error(`expected a put, got ${plan.action}`);
    expect(plan.xml).toContain('<ID>tamp-a&amp;b</ID>');
    expect(summarizeLifecycle(plan.xml)).toEqual([{ id: 'tamp-a&b', prefix: 'x<y/', days: 1 }]);
  });
});
