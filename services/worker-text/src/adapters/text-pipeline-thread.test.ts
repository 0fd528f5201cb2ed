import type { TextOperation } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { runTextPipeline } from '../domain/pipeline';
import runTextPipelineTask from './text-pipeline-thread';

const AGGRESSIVE: TextOperation[] = [
  { type: 'trim', params: { intensity: 80 } },
  { type: 'json-to-toon', params: {} },
];
const ROWS = Array.from({ length: 40 }, (_, id) => ({ id, city: `City ${id}`, seen: id % 3 }));
const DOCUMENT = `Report   of\u200B the day\n\n\n\n\`\`\`json\n${JSON.stringify(ROWS, null, 2)}\n\`\`\`\n`;

describe('the pipeline thread times each step', () => {
  it('answers the result with each step, in order, timed on the process clock', () => {
    const before = process.hrtime.bigint();
    const outcome = runTextPipelineTask({ text: DOCUMENT, operations: AGGRESSIVE });
    const after = process.hrtime.bigint();

    expect('result' in outcome && outcome.result).toEqual(runTextPipeline(DOCUMENT, AGGRESSIVE));
    const { steps } = outcome;
    expect(steps.map((step) => step.name)).toEqual([
      'text trim',
      'text json-to-toon',
      'text count tokens',
      'text count tokens',
    ]);
    let previousEnd = before;
    for (const step of steps) {
      expect(step.failed).toBe(false);
      expect(step.startedAt).toBeGreaterThanOrEqual(previousEnd);
      expect(step.endedAt).toBeGreaterThanOrEqual(step.startedAt);
      previousEnd = step.endedAt;
    }
    expect(previousEnd).toBeLessThanOrEqual(after);
  });

  it('describes each step by its shape: operation, settings, sizes, never the text', () => {
    const outcome = runTextPipelineTask({ text: DOCUMENT, operations: AGGRESSIVE });
    if (!('result' in outcome)) throw outcome.error;
    const [trim, toon, tokensIn, tokensOut] = outcome.steps.map((step) => step.attributes);
    const trimmed = runTextPipeline(DOCUMENT, AGGRESSIVE.slice(0, 1)).text;
    expect(trim).toEqual({
      'text.operation': 'trim',
      'text.operation.index': 0,
      'text.trim.intensity': 80,
      'text.length_in': DOCUMENT.length,
      'text.length_out': trimmed.length,
    });
    expect(toon).toEqual({
      'text.operation': 'json-to-toon',
      'text.operation.index': 1,
      'text.length_in': trimmed.length,
      'text.length_out': outcome.result.text.length,
      'text.json_blocks_converted': 1,
      'text.json_blocks_skipped': 0,
    });
    expect(tokensIn).toEqual({
      'text.counted': 'input',
      'text.length_in': DOCUMENT.length,
      'text.tokens': outcome.result.tokensIn,
    });
    expect(tokensOut).toEqual({
      'text.counted': 'output',
      'text.length_in': outcome.result.text.length,
      'text.tokens': outcome.result.tokensOut,
    });
    expect(outcome.result.text).not.toBe(trimmed);
  });

  it('answers the error with the steps that ran, the failed one last', () => {
    const outcome = runTextPipelineTask({
      text: 'a  b',
      operations: [
        { type: 'trim', params: { intensity: 30 } },
        { type: 'trim', params: { intensity: 101 } },
      ],
    });
    expect('result' in outcome).toBe(false);
    expect(!('result' in outcome) && outcome.error).toBeInstanceOf(RangeError);
    expect(
      outcome.steps.map((step) => [
        step.name,
        step.attributes['text.operation.index'],
        step.failed,
      ]),
    ).toEqual([
      ['text trim', 0, false],
      ['text trim', 1, true],
    ]);
    expect(outcome.steps[1]!.endedAt).toBeGreaterThanOrEqual(outcome.steps[1]!.startedAt);
  });
});
