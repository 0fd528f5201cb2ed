import { describe, expect, it } from 'vitest';
import { checkChartReadme, GENERATE_COMMAND, valuesParts } from './chart-readme';

describe('charts/tamp/README.md', () => {
  it("is what the chart's values.yaml generates", () => {
    const { upToDate } = checkChartReadme();
    expect(upToDate, `out of date: run ${GENERATE_COMMAND}`).toBe(true);
  });

  it('reads descriptions, sections, notes, examples and shared service keys from the comments', () => {
    const parts = valuesParts(
      [
        '# --- Traffic ---',
        '',
        '# A note on what follows.',
        '',
        '# The first key.',
        '# Second line,',
        '#   an: example',
        'first: 1',
        'block:',
        '  # Inside.',
        '  inner: "x"',
        '  list: []',
        '  #  - an: example after the value',
        '',
        'gateway:',
        '  replicaCount: 2',
        '  # Extra things.',
        '  extra: []',
        '  # e.g. A: "1"',
        '  env: {}',
        'upload:',
        '  replicaCount: 1',
        '  extra: []',
        '  env: {}',
        '  labels:',
        '    app.kubernetes.io/name: x',
        '',
      ].join('\n'),
    );
    expect(parts).toEqual([
      { kind: 'section', title: 'Traffic' },
      { kind: 'note', lines: ['A note on what follows.'] },
      {
        key: 'first',
        default: '1',
        description: ['The first key.', 'Second line,', '  an: example'],
      },
      { key: 'block.inner', default: '"x"', description: ['Inside.'] },
      { key: 'block.list', default: '[]', description: ['  - an: example after the value'] },
      { key: 'gateway.replicaCount', default: '2', description: [] },
      { key: 'gateway.extra', default: '[]', description: ['Extra things.'] },
      { key: 'gateway.env', default: '{}', description: ['e.g. A: "1"'] },
      { key: 'upload.replicaCount', default: '1', description: [] },
      // Said once for every service, but an example stays the gateway's.
      { key: 'upload.extra', default: '[]', description: ['Extra things.'] },
      { key: 'upload.env', default: '{}', description: [] },
      { key: 'upload.labels', default: '{"app.kubernetes.io/name":"x"}', description: [] },
    ]);
  });
});
